//go:build integration

// quickstart_test.go — README.md's quick start, run as a user runs it: the shell block after
// the `<!-- quickstart: ... -->` marker, by bash, in the root of this clone, with two literal
// swaps: its module directory (/tmp/flurry-hello) for a temporary one, and scripts/run's
// address (127.0.0.1:7420) for a flurryd this test starts (FLURRYD) on a free loopback port.
// The environment is a user's: the go that runs this test first on PATH, GOPROXY=off (nothing
// may be downloaded), no GOFLAGS. Every line the program prints starts with an ID; the IDs of
// two runs of it are all unique and of the server's node. Fails, never skips, without FLURRYD.
package flurry

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	quickstartMarker = "<!-- quickstart:"
	quickstartDir    = "/tmp/flurry-hello"
	quickstartServer = "127.0.0.1:7420"
	quickstartLimit  = 240 * time.Second // building the program included, on a loaded machine
)

// quickstartBlock is the shell block after the marker in README.md.
func quickstartBlock(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	at := strings.Index(text, quickstartMarker)
	if at < 0 {
		t.Fatalf("README.md has no %q marker before its quick start", quickstartMarker)
	}
	rest := text[at:]
	open := strings.Index(rest, "\n```sh\n")
	if open < 0 {
		t.Fatal("README.md: no ```sh block after the quick start marker")
	}
	rest = rest[open+len("\n```sh\n"):]
	end := strings.Index(rest, "\n```\n")
	if end < 0 {
		t.Fatal("README.md: the quick start block does not end")
	}
	return rest[:end+1]
}

// userEnv is this process's environment as a user's shell would have it: no GOFLAGS (meson
// sets -mod=mod for the package's own tests), GOPROXY=off, the test's go first on PATH.
func userEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOPROXY=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOPROXY=off", "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestQuickstart(t *testing.T) {
	counted(t)
	binary := flurrydBinary(t)
	block := quickstartBlock(t)
	for _, literal := range []string{quickstartDir, quickstartServer, "go run ."} {
		if strings.Count(block, literal) == 0 {
			t.Fatalf("the quick start no longer says %q; update this test with it:\n%s", literal, block)
		}
	}
	nodeID := node(7)
	server := startFlurryd(t, binary, nodeID)
	dir := filepath.Join(t.TempDir(), "flurry-hello")
	script := strings.ReplaceAll(strings.ReplaceAll(block, quickstartDir, dir), quickstartServer, server.Addr)
	clone, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), quickstartLimit)
	defer cancel()
	// The program keeps the client's defaults (5 attempts of 100 ms), which a fresh process on a
	// loaded machine can miss: "no answer from" says the machine was slow, not that the quick
	// start is wrong, so the program is run again (`go run .` in the module the script made), at
	// most 3 runs in all; any other failure fails.
	run := func(name string, args ...string) string {
		t.Helper()
		for attempt := 1; ; attempt++ {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Dir, cmd.Env = clone, userEnv()
			if name != "bash" {
				cmd.Dir = dir
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err == nil {
				return string(out)
			}
			if attempt == 3 || !strings.Contains(stderr.String(), "no answer from") {
				t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out, stderr.String())
			}
			t.Logf("run %d got no answer (a slow machine): the program again\n%s", attempt, stderr.String())
			name, args = "go", []string{"run", "."}
		}
	}
	first := run("bash", "-euo", "pipefail", "-c", script)
	second := run("go", "run", ".") // the program again: another process, other IDs
	seen := map[uint64]bool{}
	layout := SnowflakeLayout() // flurryd's default, which the test server runs
	for _, output := range []string{first, second} {
		lines := strings.Split(strings.TrimSpace(output), "\n")
		if len(lines) != 5 {
			t.Fatalf("the program printed %d lines, want 5 (one per ID):\n%s", len(lines), output)
		}
		for _, line := range lines {
			fields := strings.Fields(line)
			id, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil {
				t.Fatalf("line %q does not start with an ID", line)
			}
			if seen[id] {
				t.Fatalf("ID %d printed twice", id)
			}
			seen[id] = true
			if d := layout.Decode(id); d.Node != nodeID || len(fields) < 4 || fields[1] != FormatBase32(id) ||
				fields[3] != strconv.Itoa(int(nodeID)) {
				t.Errorf("line %q: ID of node %d, want %d, and its base32 form", line, d.Node, nodeID)
			}
		}
	}
	t.Logf("the quick start ran in %s against %s; its program printed:\n%s", dir, server.Addr, first)
}
