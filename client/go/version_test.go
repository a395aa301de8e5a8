// version_test.go — Version is the project's version: ../../VERSION, relative to client/go.
package flurry

import (
	"os"
	"strings"
	"testing"
)

func TestVectorsVersionIsTheProjects(t *testing.T) {
	counted(t)
	data, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatalf("the project's version: %v", err)
	}
	if project := strings.TrimSpace(string(data)); project != Version || project == "" {
		t.Errorf("flurry.Version is %q, ../../VERSION says %q", Version, project)
	}
}
