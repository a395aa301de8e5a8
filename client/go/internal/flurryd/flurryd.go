// Package flurryd starts and stops real flurryd processes for the integration test and the
// benchmark: a fresh temporary state dir each, a free UDP port on 127.0.0.1, --init.
//
// Contract: every process started is killed with SIGKILL by its PID and reaped by Kill or
// Stop, which are safe to call more than once; the child also gets SIGKILL if this process
// dies first (Pdeathsig), so a test that is killed by its timeout leaves nothing running.
// Every wait is bounded.
package flurryd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reapLimit bounds the wait for a killed process to be reaped.
const reapLimit = 10 * time.Second

// Process is one running flurryd.
type Process struct {
	Addr   string // "127.0.0.1:PORT" it serves on
	NodeID int
	dir    string // temporary: state/, ctl.sock, flurryd.log
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
	once   sync.Once
}

// handedOut holds every port freeUDPPort gave: never twice in one process. A test starting two
// flurryds asks for both ports before either binds, and the kernel's random pick may repeat.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeUDPPort asks the kernel for a free port on 127.0.0.1, one this process has not handed out
// before. Another process may take it before flurryd binds it: Start then fails and the caller
// tries again.
func freeUDPPort() (int, error) {
	for try := 0; try < 1000; try++ {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return 0, err
		}
		port := conn.LocalAddr().(*net.UDPAddr).Port
		conn.Close()
		handedOut.Lock()
		fresh := !handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if fresh {
			return port, nil
		}
	}
	return 0, errors.New("1000 ports picked on 127.0.0.1, each one handed out before")
}

// Start runs `binary --init --state-dir DIR/state --listen 127.0.0.1:PORT --control-socket
// DIR/ctl.sock --node-id NODE [extra...]` with its output in DIR/flurryd.log.
func Start(binary string, nodeID int, extra ...string) (*Process, error) {
	if binary == "" {
		return nil, errors.New("no flurryd binary given (FLURRYD is not set)")
	}
	dir, err := os.MkdirTemp("", "flurry-go-flurryd-")
	if err != nil {
		return nil, err
	}
	port, err := freeUDPPort()
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "state"), 0o700)
	}
	var log *os.File
	if err == nil {
		log, err = os.Create(filepath.Join(dir, "flurryd.log"))
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	p := &Process{Addr: fmt.Sprintf("127.0.0.1:%d", port), NodeID: nodeID, dir: dir, exited: make(chan struct{})}
	args := []string{"--init", "--state-dir", filepath.Join(dir, "state"), "--listen", p.Addr,
		"--control-socket", filepath.Join(dir, "ctl.sock"), "--node-id", strconv.Itoa(nodeID)}
	p.cmd = exec.Command(binary, append(args, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("cannot start %s: %w", binary, err)
	}
	go func() {
		p.cmd.Wait() //nolint:errcheck // a killed process exits with a signal: expected
		close(p.exited)
	}()
	return p, nil
}

// ControlSocket is the path of its control socket (flurryctl --control-socket).
func (p *Process) ControlSocket() string { return filepath.Join(p.dir, "ctl.sock") }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// WaitReady calls ready until it returns true, the process exits, or limit passes.
func (p *Process) WaitReady(ready func() bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("flurryd %s exited before it answered: %s", p.Addr, p.LogTail())
		default:
		}
		if ready() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("flurryd %s did not answer within %v: %s", p.Addr, limit, p.LogTail())
}

// Kill sends SIGKILL to the PID and reaps the process (bounded). Safe to call again.
func (p *Process) Kill() error {
	var err error
	p.once.Do(func() {
		if e := syscall.Kill(p.PID(), syscall.SIGKILL); e != nil && !errors.Is(e, syscall.ESRCH) {
			err = fmt.Errorf("kill -9 %d: %w", p.PID(), e)
		}
	})
	select {
	case <-p.exited:
		return err
	case <-time.After(reapLimit):
		return fmt.Errorf("flurryd pid %d not reaped %v after SIGKILL", p.PID(), reapLimit)
	}
}

// Stop kills the process and removes its directory.
func (p *Process) Stop() error {
	err := p.Kill()
	os.RemoveAll(p.dir)
	return err
}

// LogTail is the last lines of the process's output, for failure messages.
func (p *Process) LogTail() string {
	data, err := os.ReadFile(filepath.Join(p.dir, "flurryd.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// StartReady starts a flurryd and waits (at most limit) until ready(addr) is true, trying up to
// three free ports; on failure nothing is left running.
func StartReady(binary string, nodeID int, ready func(addr string) bool, limit time.Duration,
	extra ...string) (*Process, error) {
	var last error
	for try := 0; try < 3; try++ {
		p, err := Start(binary, nodeID, extra...)
		if err != nil {
			return nil, err
		}
		if last = p.WaitReady(func() bool { return ready(p.Addr) }, limit); last == nil {
			return p, nil
		}
		p.Stop()
	}
	return nil, last
}
