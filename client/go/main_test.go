// main_test.go — what every test binary run of this package checks after its tests: that at
// least one test ran. Each meson test() selects its tests with -run; a pattern that matches
// nothing (a renamed test) must fail the test(), never pass with "no tests to run".
package flurry

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

var testsRun atomic.Int32

// counted marks a test as run; every Test function calls it first.
func counted(t *testing.T) {
	t.Helper()
	testsRun.Add(1)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && testsRun.Load() == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: no test ran: the -run pattern matches no test of package flurry")
		code = 1
	}
	os.Exit(code)
}
