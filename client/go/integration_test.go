//go:build integration

// integration_test.go — the client against two real flurryd processes (FLURRYD names the
// binary; meson sets it): 1,000,000 IDs from many goroutines through batches, single IDs and
// the prefetch buffer, all unique; then one server is killed with SIGKILL in the middle of a
// run and the clients must fail over with every ID still unique. TestIntegrationSigned runs a
// flurryd with --auth required: signed clients (the key read from a client key file) get
// unique IDs (a new client's first GET_IDS signed again for the node the server names), an
// unsigned client is refused auth_required, a wrong secret and an unknown key id get no answer
// (dropped), named. TestIntegrationDraining drains one of two servers with flurryctl
// (FLURRYCTL) while clients take IDs. Built only with
// -tags integration; a missing FLURRYD fails, it never skips. Every process started is killed
// and reaped by PID on every path (t.Cleanup; Pdeathsig if the test binary dies).
package flurry

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flurry.dev/client/internal/flurryd"
)

const (
	readyLimit = 60 * time.Second // a flurryd answers PING within this (sanitizer builds start slowly)
	phaseLimit = 90 * time.Second // each phase ends within this, done or not
	// The attempt timeout of every client below where no attempt is meant to time out (as the
	// Python client's tests): no answer of a flurryd on this machine comes near it however loaded
	// (1 s did not hold: a sanitizer build's first signed answer, and a drained node's FENCED,
	// came later once in a fresh-clone CI, and the late answer changed what the tests count), so
	// only a server that is dead is waited out, once per call in flight.
	integrationTimeout = 5 * time.Second
	// Where the server drops the request on purpose (a bad MAC, an unknown key id): the timeout
	// is the outcome, and nothing asserted depends on when it comes.
	droppedTimeout = 200 * time.Millisecond
)

// nodeBase: the node ids of this run are nodeBase+1.. . flurryd refuses a node id another
// flurryd serves on the same host (its host-wide lock), so they are not the small numbers other
// test suites on this machine use.
var nodeBase = uint32(100 + rand.New(rand.NewSource(time.Now().UnixNano())).Intn(800))

func node(i uint32) uint32 { return nodeBase + i }

func startFlurryd(t *testing.T, binary string, nodeID uint32, extra ...string) *flurryd.Process {
	t.Helper()
	ready := func(addr string) bool {
		opts := DefaultOptions()
		opts.Servers, opts.Attempts = []string{addr}, 1
		c, err := New(opts)
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.Ping()
		return err == nil
	}
	p, err := flurryd.StartReady(binary, int(nodeID), ready, readyLimit, extra...) // unsigned PING: served under --auth required
	if err != nil {
		t.Fatalf("flurryd --node-id %d: %v", nodeID, err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping flurryd pid %d: %v", p.PID(), err)
		}
	})
	t.Logf("flurryd node %d: pid %d on %s", nodeID, p.PID(), p.Addr)
	return p
}

func integrationClient(t *testing.T, prefetch int, servers ...string) *Client {
	t.Helper()
	return signedIntegrationClient(t, nil, prefetch, servers...)
}

// signedIntegrationClient is integrationClient signing with key (nil: unsigned).
func signedIntegrationClient(t *testing.T, key *Key, prefetch int, servers ...string) *Client {
	t.Helper()
	return integrationClientWith(t, key, prefetch, DefaultOptions().Attempts, servers...)
}

// integrationClientWith is signedIntegrationClient with `attempts` attempts.
func integrationClientWith(t *testing.T, key *Key, prefetch, attempts int, servers ...string) *Client {
	t.Helper()
	return integrationClientTimed(t, key, prefetch, attempts, integrationTimeout, servers...)
}

// integrationClientTimed is integrationClientWith with attempts of `timeout`.
func integrationClientTimed(t *testing.T, key *Key, prefetch, attempts int, timeout time.Duration,
	servers ...string) *Client {
	t.Helper()
	opts := DefaultOptions()
	opts.Servers = servers
	opts.Prefetch = prefetch
	opts.Key = key
	opts.Timeout = timeout
	opts.Attempts = attempts
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// collector gathers the IDs of many goroutines.
type collector struct {
	mu   sync.Mutex
	ids  []uint64
	size atomic.Int64
}

func (c *collector) add(ids []uint64) {
	c.mu.Lock()
	c.ids = append(c.ids, ids...)
	c.mu.Unlock()
	c.size.Add(int64(len(ids)))
}

// worker calls fetch until it has `want` IDs, stop is closed, or the deadline passes.
func worker(t *testing.T, wg *sync.WaitGroup, into *collector, want int, stop <-chan struct{},
	deadline time.Time, fetch func() ([]uint64, error)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for got := 0; got < want; {
			select {
			case <-stop:
				return
			default:
			}
			if time.Now().After(deadline) {
				t.Errorf("worker: %d of %d IDs by the deadline", got, want)
				return
			}
			ids, err := fetch()
			if err != nil {
				t.Errorf("worker: %v", err)
				return
			}
			into.add(ids)
			got += len(ids)
		}
	}()
}

func batch(c *Client, n int) func() ([]uint64, error) {
	return func() ([]uint64, error) { return c.Get(n) }
}

func single(c *Client) func() ([]uint64, error) {
	return func() ([]uint64, error) {
		id, err := c.Next()
		return []uint64{id}, err
	}
}

// checkUnique fails on any ID seen twice and on IDs of another node.
func checkUnique(t *testing.T, ids []uint64, layout Layout, nodes ...uint32) map[uint32]int {
	t.Helper()
	sorted := append([]uint64(nil), ids...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	perNode := map[uint32]int{}
	for i, id := range sorted {
		if i > 0 && sorted[i-1] == id {
			t.Fatalf("ID %d was handed out twice", id)
		}
		perNode[layout.Decode(id).Node]++
	}
	for node := range perNode {
		if !containsNode(nodes, node) {
			t.Errorf("%d IDs of node %d, want only nodes %v", perNode[node], node, nodes)
		}
	}
	return perNode
}

func containsNode(nodes []uint32, node uint32) bool {
	for _, n := range nodes {
		if n == node {
			return true
		}
	}
	return false
}

// flurrydBinary is FLURRYD; a test without it fails, it never skips.
func flurrydBinary(t *testing.T) string {
	binary := os.Getenv("FLURRYD")
	if binary == "" {
		t.Fatal("FLURRYD is not set: it names the flurryd binary. Run `meson test -C build --suite integration`, " +
			"or by hand: FLURRYD=$PWD/build/control/flurryd go test -tags integration -run '^TestIntegration' ./...")
	}
	return binary
}

func TestIntegration(t *testing.T) {
	counted(t)
	binary := flurrydBinary(t)
	n1, n2 := node(1), node(2)
	one, two := startFlurryd(t, binary, n1), startFlurryd(t, binary, n2)
	info, err := integrationClient(t, 0, one.Addr).Info()
	if err != nil {
		t.Fatal(err)
	}
	layout := info.Layout()
	if err := layout.Validate(); err != nil {
		t.Fatalf("flurryd's layout %+v: %v", info, err)
	}
	var all []uint64

	t.Run("million", func(t *testing.T) {
		var wg sync.WaitGroup
		var ids collector
		deadline := time.Now().Add(phaseLimit)
		forward := integrationClient(t, 0, one.Addr, two.Addr)
		backward := integrationClient(t, 0, two.Addr, one.Addr)
		prefetched := integrationClient(t, 16384, one.Addr, two.Addr)
		for g := 0; g < 4; g++ { // 4 x 150,000 in batches of 5,000, two goroutines per client
			shared := forward
			if g%2 == 1 {
				shared = backward
			}
			worker(t, &wg, &ids, 150_000, nil, deadline, batch(shared, 5000))
		}
		worker(t, &wg, &ids, 10_000, nil, deadline, single(integrationClient(t, 0, one.Addr, two.Addr)))
		worker(t, &wg, &ids, 10_000, nil, deadline, single(integrationClient(t, 0, two.Addr, one.Addr)))
		for g := 0; g < 4; g++ { // 4 x 95,000 through one prefetch buffer
			worker(t, &wg, &ids, 95_000, nil, deadline, single(prefetched))
		}
		start := time.Now()
		wg.Wait()
		if len(ids.ids) != 1_000_000 {
			t.Fatalf("%d IDs, want 1,000,000", len(ids.ids))
		}
		perNode := checkUnique(t, ids.ids, layout, n1, n2)
		t.Logf("1,000,000 unique IDs in %v: %v per node; prefetch client %+v", time.Since(start), perNode, prefetched.Counters())
		if perNode[n1] == 0 || perNode[n2] == 0 {
			t.Errorf("both servers should have served: %v", perNode)
		}
		all = append(all, ids.ids...)
	})

	t.Run("failover", func(t *testing.T) {
		var wg sync.WaitGroup
		var before, after collector // after: Gets started once the server was killed and reaped
		var killed atomic.Bool
		stop := make(chan struct{})
		deadline := time.Now().Add(phaseLimit)
		batches := integrationClient(t, 0, one.Addr, two.Addr)
		prefetched := integrationClient(t, 8192, one.Addr, two.Addr)
		for g := 0; g < 2; g++ {
			worker(t, &wg, &before, 1<<30, stop, deadline, func() ([]uint64, error) {
				started := killed.Load()
				got, err := batches.Get(1000)
				if started {
					after.add(got)
					return nil, err
				}
				return got, err
			})
		}
		worker(t, &wg, &before, 1<<30, stop, deadline, single(batches))
		worker(t, &wg, &before, 1<<30, stop, deadline, single(prefetched))
		worker(t, &wg, &before, 1<<30, stop, deadline, single(prefetched))
		waitFor := func(what string, c *collector, n int64) {
			for c.size.Load() < n && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if c.size.Load() < n {
				t.Errorf("%s: %d of %d IDs by the deadline", what, c.size.Load(), n)
			}
		}
		waitFor("before the kill", &before, 50_000)
		if err := one.Kill(); err != nil { // SIGKILL by PID, reaped
			t.Error(err)
		}
		killed.Store(true)
		t.Logf("killed flurryd node %d (pid %d) after %d IDs", n1, one.PID(), before.size.Load())
		waitFor("after the kill", &after, 50_000)
		close(stop)
		wg.Wait()
		if beforeNodes := checkUnique(t, before.ids, layout, n1, n2); beforeNodes[n1] == 0 {
			t.Error("no IDs of node 1 before the kill: the clients never used the server that was killed")
		}
		ids := append(append([]uint64(nil), before.ids...), after.ids...)
		perNode := checkUnique(t, append(ids, all...), layout, n1, n2)
		if afterNodes := checkUnique(t, after.ids, layout, n2); afterNodes[n2] == 0 {
			t.Error("no IDs after the kill")
		}
		c := batches.Counters()
		if c.Timeouts == 0 || prefetched.Counters().Timeouts == 0 {
			t.Errorf("the clients never timed out on the killed server: %+v / %+v", c, prefetched.Counters())
		}
		t.Logf("failover: %d IDs before the kill, %d after; all %d unique (%v per node); batch client %+v",
			before.size.Load(), after.size.Load(), len(ids)+len(all), perNode, c)
	})
}

func TestIntegrationSigned(t *testing.T) {
	counted(t)
	binary := flurrydBinary(t)
	const secret = "000102030405060708090a0b0c0d0e0f"
	dir := t.TempDir()
	serverKeys, clientKey := filepath.Join(dir, "keys.toml"), filepath.Join(dir, "client.key")
	for path, text := range map[string]string{
		serverKeys: "[[key]]\nname = \"go\"\nid = 7\nsecret = \"" + secret + "\"\nopcodes = [\"get_ids\", \"info\", \"get_seq\"]\nsequences = [\"*\"]\n",
		clientKey:  "name = \"go\"\nid = 7\nsecret = \"" + secret + "\"\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n3 := node(3)
	server := startFlurryd(t, binary, n3, "--auth", "required", "--key-file", serverKeys)
	key, err := ReadKeyFile(clientKey)
	if err != nil {
		t.Fatal(err)
	}

	signed := signedIntegrationClient(t, &key, 0, server.Addr)
	info, err := signed.Info()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signed.Ping(); err != nil {
		t.Fatal(err)
	}
	prefetched := signedIntegrationClient(t, &key, 4096, server.Addr) // its refills are signed
	var ids []uint64
	for len(ids) < 50_000 {
		got, err := signed.Get(5000)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	for i := 0; i < 20_000; i++ {
		id, err := prefetched.Next()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	checkUnique(t, ids, info.Layout(), n3)
	// GET_SEQ is signed too: the server verified it before it found no such sequence.
	_, err = signed.GetSeq("absent", 1)
	wantCode(t, err, ErrUnknownSequence, "no sequence 'absent'")
	// Every answer flurryd sends is signed for its request: the only answer a signed client
	// cannot verify is a late one, to an attempt that timed out, checked against the MAC of
	// the request outstanding since. Timeouts themselves are the machine's business.
	for _, c := range []*Client{signed, prefetched} {
		if got := c.Counters(); got.UnverifiedResponses > got.Timeouts {
			t.Errorf("signed client counters %+v: answers that did not verify, beyond late ones", got)
		}
	}
	t.Logf("%d signed IDs, unique; counters %+v", len(ids), signed.Counters())

	_, err = integrationClient(t, 0, server.Addr).Get(1)
	wantCode(t, err, ErrUnauthorized, "answered UNAUTHORIZED (auth_required) to GET_IDS", "give the client a key")

	// These two wait out every attempt (nothing they get back verifies): 2 attempts, not 5.
	wrongSecret := key
	wrongSecret.Secret[0] ^= 0x80
	wrong := integrationClientTimed(t, &wrongSecret, 0, 2, droppedTimeout, server.Addr)
	_, err = wrong.Get(1)
	wantCode(t, err, ErrNoAnswer, "no answer from "+server.Addr) // a bad MAC is dropped, never answered
	if got := wrong.Counters(); got.IDsReceived != 0 || got.Requests != 2 || got.Timeouts != 2 {
		t.Errorf("wrong secret counters %+v", got)
	}

	// An unknown key id is dropped like a bad MAC (no enumeration of key ids): silence, named.
	unknownKey := key
	unknownKey.ID = 8
	_, err = integrationClientTimed(t, &unknownKey, 0, 2, droppedTimeout, server.Addr).Get(1)
	wantCode(t, err, ErrNoAnswer, "a server drops signed requests whose key id it does not know or whose MAC does not verify")

	// A new client's first GET_IDS names no node: refused wrong_server, signed again for its node
	// at once without using an attempt (it has one); the next call names that node from the start.
	first := integrationClientWith(t, &key, 0, 1, server.Addr)
	for call, want := range []uint64{2, 3} {
		got, err := first.Get(10)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
		if c := first.Counters(); c.Requests != want || c.UnverifiedResponses != 0 {
			t.Errorf("call %d: counters %+v, want %d requests in all", call+1, c, want)
		}
	}
	checkUnique(t, ids, info.Layout(), n3)
}

// flurryctlBinary is FLURRYCTL; a test without it fails, it never skips.
func flurryctlBinary(t *testing.T) string {
	binary := os.Getenv("FLURRYCTL")
	if binary == "" {
		t.Fatal("FLURRYCTL is not set: it names the flurryctl binary (meson sets it)")
	}
	return binary
}

// Two servers; one is drained by its operator (flurryctl drain) while clients take IDs: they
// move to the other (GET_IDS answered FENCED, detail draining), every ID unique; a client of
// the drained server alone fails ErrDraining, naming it. Calls with a context work as the
// others do.
func TestIntegrationDraining(t *testing.T) {
	counted(t)
	binary, ctl := flurrydBinary(t), flurryctlBinary(t)
	n4, n5 := node(4), node(5)
	drained, other := startFlurryd(t, binary, n4), startFlurryd(t, binary, n5)
	info, err := integrationClient(t, 0, drained.Addr).Info()
	if err != nil {
		t.Fatal(err)
	}
	both := integrationClient(t, 0, drained.Addr, other.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), phaseLimit)
	defer cancel()
	var ids []uint64
	for i := 0; i < 10; i++ {
		got, err := both.GetContext(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	out, err := exec.Command(ctl, "--control-socket", drained.ControlSocket(), "drain").CombinedOutput()
	if err != nil {
		t.Fatalf("flurryctl drain: %v: %s", err, out)
	}
	for i := 0; i < 10; i++ {
		got, err := both.GetContext(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	perNode := checkUnique(t, ids, info.Layout(), n4, n5)
	if c := both.Counters(); c.Fenced != 1 || perNode[n4] == 0 || perNode[n5] == 0 {
		t.Errorf("IDs per node %v, counters %+v: want both nodes, and one FENCED answer before the move", perNode, c)
	}
	_, err = integrationClientWith(t, nil, 0, 2, drained.Addr).GetContext(ctx, 1)
	wantCode(t, err, ErrDraining, drained.Addr+" answered FENCED 2 times (draining: its operator is stopping it)")
	if _, err := integrationClient(t, 0, drained.Addr).PingContext(ctx); err != nil {
		t.Errorf("a drained server still answers PING: %v", err)
	}
}
