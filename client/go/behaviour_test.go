// behaviour_test.go — the client against scripted fake servers (fakeserver_test.go) on
// 127.0.0.1: RETRY back-off from the server's hint, FENCED and timeouts fail over, stale and
// malformed answers are counted and ignored, partial answers are asked again with PROTOCOL.md's
// padding, errors name servers, attempts and timeout, GET_SEQ follows NOT_OWNER to the node
// that owns a monotonic sequence. No flurryd is involved.
package flurry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// idSource hands out consecutive IDs, at most perAnswer per answer, in one range.
type idSource struct {
	mu        sync.Mutex
	next      uint64
	perAnswer uint32
}

func (s *idSource) answer(r request) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := r.count
	if count > s.perAnswer {
		count = s.perAnswer
	}
	first := s.next
	s.next += uint64(count)
	return okRanges(r, Range{First: first, Count: count})
}

func newIDSource(start uint64, perAnswer uint32) *idSource {
	return &idSource{next: start, perAnswer: perAnswer}
}

func checkCounters(t *testing.T, c *Client, want Counters) {
	t.Helper()
	if got := c.Counters(); got != want {
		t.Errorf("counters\n got %+v\nwant %+v", got, want)
	}
}

func wantCode(t *testing.T, err error, target *Error, mentions ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %s", err, target.Code)
	}
	for _, text := range mentions {
		if !strings.Contains(err.Error(), text) {
			t.Errorf("error %q does not mention %q", err, text)
		}
	}
}

func TestBehaviourRetryHonoursHint(t *testing.T) {
	counted(t)
	for _, c := range []struct {
		name   string
		hintUs uint32
		want   time.Duration
	}{
		{"hint", 3000, 3 * time.Millisecond},
		{"zero hint waits the minimum", 0, RetryWaitMin},
		{"long hint is capped", 5_000_000, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids := newIDSource(1000, 4096)
			server := startFake(t, func(r request, before []request) [][]byte {
				if len(before) < 2 {
					return [][]byte{statusAnswer(r, StatusRetry, c.hintUs)}
				}
				return [][]byte{ids.answer(r)}
			})
			var waits []time.Duration
			client := newTestClient(t, &waits, server.addr)
			got, err := client.Get(3)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got[0] != 1000 {
				t.Errorf("IDs %v, want 1000..1002", got)
			}
			if len(waits) != 2 || waits[0] != c.want || waits[1] != c.want {
				t.Errorf("waits %v, want 2 x %v", waits, c.want)
			}
			checkCounters(t, client, Counters{Requests: 3, Responses: 3, Retries: 2, IDsReceived: 3})
			requests := server.received()
			if len(requests) != 3 || requests[0].id == requests[1].id || requests[1].id == requests[2].id {
				t.Errorf("each attempt needs a fresh request id: %+v", requests)
			}
		})
	}
}

// Without the recording hook: the hint is really waited.
func TestBehaviourRetryWaitsInRealTime(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	server := startFake(t, func(r request, before []request) [][]byte {
		if len(before) < 2 {
			return [][]byte{statusAnswer(r, StatusRetry, 15_000)}
		}
		return [][]byte{ids.answer(r)}
	})
	client := newTestClient(t, nil, server.addr)
	start := time.Now()
	if _, err := client.Next(); err != nil {
		t.Fatal(err)
	}
	// A lower bound only: a timer never fires early, so a slow machine only makes it longer.
	if elapsed := time.Since(start); elapsed < 30*time.Millisecond {
		t.Errorf("two RETRY hints of 15 ms took %v", elapsed)
	}
}

func TestBehaviourRetryBudget(t *testing.T) {
	counted(t)
	server := startFake(t, func(r request, before []request) [][]byte {
		return [][]byte{statusAnswer(r, StatusRetry, 100_000)}
	})
	var waits []time.Duration
	opts := DefaultOptions()
	opts.Servers = []string{server.addr}
	opts.Timeout = answerTimeout
	opts.RetryBudget = 250 * time.Millisecond
	client := clientWith(t, opts, &waits)
	_, err := client.Get(1)
	wantCode(t, err, ErrRetryExhausted, server.addr, "RETRY", "budget 250ms")
	if len(waits) != 2 {
		t.Errorf("waits %v: 100 ms twice fits a 250 ms budget, a third does not", waits)
	}
	checkCounters(t, client, Counters{Requests: 3, Responses: 3, Retries: 3})
}

func TestBehaviourFencedFailsOver(t *testing.T) {
	counted(t)
	ids := newIDSource(77, 4096)
	fenced := startFake(t, func(r request, before []request) [][]byte { return [][]byte{statusAnswer(r, StatusFenced, 0)} })
	good := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	client := newTestClient(t, nil, fenced.addr, good.addr)
	for i := 0; i < 2; i++ { // the second call goes straight to the good server
		if _, err := client.Get(5); err != nil {
			t.Fatal(err)
		}
	}
	if len(fenced.received()) != 1 || len(good.received()) != 2 {
		t.Errorf("fenced server asked %d times, good %d: want 1 and 2", len(fenced.received()), len(good.received()))
	}
	checkCounters(t, client, Counters{Requests: 3, Responses: 3, Fenced: 1, IDsReceived: 10})

	other := startFake(t, func(r request, before []request) [][]byte { return [][]byte{statusAnswer(r, StatusFenced, 0)} })
	all := newTestClient(t, nil, fenced.addr, other.addr)
	_, err := all.Get(1)
	wantCode(t, err, ErrFenced, fenced.addr, other.addr, "after 3 attempts", "FENCED")
	// A fenced server still answers PING.
	pinged := startFake(t, func(r request, before []request) [][]byte { return [][]byte{statusAnswer(r, StatusOK, 0)} })
	if result, err := newTestClient(t, nil, pinged.addr).Ping(); err != nil || result.Node != 5 || result.Server != pinged.addr {
		t.Errorf("ping: %+v %v", result, err)
	}
}

func TestBehaviourStaleIgnored(t *testing.T) {
	counted(t)
	server := startFake(t, func(r request, before []request) [][]byte {
		if len(before) == 0 {
			return nil // the first attempt times out
		}
		first := before[0]
		foreign := r
		foreign.id ^= 0xffff_0000
		return [][]byte{
			okRanges(first, Range{First: 1, Count: first.count}),     // late answer to the first attempt
			okRanges(foreign, Range{First: 2, Count: foreign.count}), // someone else's
			okRanges(r, Range{First: 500, Count: r.count}),
		}
	})
	client := newTestClient(t, nil, server.addr)
	got, err := client.Get(4)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 500 || len(got) != 4 {
		t.Errorf("IDs %v, want 500..503 (a stale answer was taken)", got)
	}
	checkCounters(t, client, Counters{Requests: 2, Responses: 1, Timeouts: 1, IgnoredResponses: 2, IDsReceived: 4})
}

func TestBehaviourMalformedCounted(t *testing.T) {
	counted(t)
	server := startFake(t, func(r request, before []request) [][]byte {
		good := okRanges(r, Range{First: 900, Count: r.count})
		oversize := append(append([]byte(nil), good...), make([]byte, DatagramSizeMax)...)
		reflected := encodeRequest(r.opcode, 0, r.count, r.id, RequestHeaderSize)
		badMagic := append([]byte{0x46, 0x4d}, good[2:]...)
		badVersion := append(append([]byte(nil), good[:2]...), append([]byte{2}, good[3:]...)...)
		wrongOpcode := statusAnswer(request{opcode: uint8(OpPing), id: r.id}, StatusOK, 0)
		retryWithRange := answerTo(r, StatusRetry, 60_000_000)
		retryWithRange.RangeCount = 1
		return [][]byte{
			good[:19], badMagic, oversize, badVersion, reflected, wrongOpcode,
			okRanges(r, Range{First: 900, Count: r.count + 1}),                    // more IDs than asked
			okRanges(r, Range{First: 900, Count: 2}, Range{First: 901, Count: 1}), // overlapping
			encodeResponse(retryWithRange, []Range{{First: 1, Count: 1}}, nil),    // its hint must not be used
			statusAnswer(r, StatusOK, 0),                                          // OK without a range
			good[:len(good)-1],                                                    // bad length
			good,
		}
	})
	var waits []time.Duration
	client := newTestClient(t, &waits, server.addr)
	got, err := client.Get(3)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 900 || len(got) != 3 {
		t.Errorf("IDs %v, want 900..902", got)
	}
	if len(waits) != 0 {
		t.Errorf("waited %v: a malformed RETRY's hint was used", waits)
	}
	checkCounters(t, client, Counters{Requests: 1, Responses: 1, MalformedResponses: 11, IDsReceived: 3})
}

func TestBehaviourTimeoutNextServer(t *testing.T) {
	counted(t)
	ids := newIDSource(10, 4096)
	quiet := startFake(t, silent)
	good := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	client := newTestClient(t, nil, quiet.addr, good.addr) // waits out answerTimeout once, on quiet
	start := time.Now()
	got, err := client.Get(2)
	if err != nil || got[0] != 10 {
		t.Fatalf("IDs %v, %v", got, err)
	}
	// A lower bound only: a read deadline never passes early, so a slow machine only makes it
	// longer.
	if elapsed := time.Since(start); elapsed < answerTimeout {
		t.Errorf("failed over after %v, before the %v timeout", elapsed, answerTimeout)
	}
	checkCounters(t, client, Counters{Requests: 2, Responses: 1, Timeouts: 1, IDsReceived: 2})

	// No server answers at all: nothing can come late, so a short timeout is safe here.
	other := startFake(t, silent)
	opts := DefaultOptions()
	opts.Servers = []string{quiet.addr, other.addr}
	opts.Timeout = 30 * time.Millisecond
	opts.Attempts = 3
	_, err = clientWith(t, opts, nil).Info()
	wantCode(t, err, ErrNoAnswer, "no answer from "+quiet.addr+", "+other.addr+" after 3 attempts of 30ms")
}

func TestBehaviourPartialAnswersUsePadding(t *testing.T) {
	counted(t)
	ids := newIDSource(1<<40, 1000)
	server := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	client := newTestClient(t, nil, server.addr)
	got, err := client.Get(2500)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range got {
		if id != 1<<40+uint64(i) {
			t.Fatalf("ID %d is %d", i, id)
		}
	}
	var counts []uint32
	for _, r := range server.received() {
		counts = append(counts, r.count)
		if want := RequestSizeForIDs(uint64(r.count), 256); r.size != want {
			t.Errorf("request for %d IDs is %d bytes, the padding rule says %d", r.count, r.size, want)
		}
	}
	if len(counts) != 3 || counts[0] != 2500 || counts[1] != 1500 || counts[2] != 500 {
		t.Errorf("asked for %v, want 2500, then the rest: 1500, 500", counts)
	}
	if r := server.received()[0]; r.size != 51 { // ceil(2500/256)+1 = 11 ranges: ceil(152/3)
		t.Errorf("first request %d bytes, want 51", r.size)
	}
}

func TestBehaviourBadRequestEndsTheCall(t *testing.T) {
	counted(t)
	bad := startFake(t, func(r request, before []request) [][]byte { return [][]byte{statusAnswer(r, StatusBadRequest, 22)} })
	unused := startFake(t, silent)
	_, err := newTestClient(t, nil, bad.addr, unused.addr).Get(1)
	wantCode(t, err, ErrBadRequest, bad.addr, "BAD_REQUEST", "trailing_bytes")
	if len(unused.received()) != 0 {
		t.Error("BAD_REQUEST failed over; another server would answer the same")
	}
	auth := startFake(t, func(r request, before []request) [][]byte { return [][]byte{statusAnswer(r, StatusUnauthorized, 32)} })
	_, err = newTestClient(t, nil, auth.addr).Ping()
	wantCode(t, err, ErrUnauthorized, "auth_unsupported")
}

func TestBehaviourInfoDecodes(t *testing.T) {
	counted(t)
	info := Info{EpochMs: DefaultEpochMs, TimeUnitMs: 1, TimeBits: 41, NodeBits: 10, SequenceBits: 12, CoreBits: 2, Workers: 4}
	server := startFake(t, func(r request, before []request) [][]byte {
		return [][]byte{encodeResponse(answerTo(r, StatusOK, 0), nil, &info)}
	})
	got, err := newTestClient(t, nil, server.addr).Info()
	if err != nil || got != info {
		t.Fatalf("info %+v, %v", got, err)
	}
	layout := got.Layout()
	if err := layout.Validate(); err != nil {
		t.Fatal(err)
	}
	if !layout.Fits(132633958815027176) || layout.Fits(1<<63) {
		t.Error("Fits: a snowflake ID uses 63 bits")
	}
	d := layout.Decode(132633958815027176) // vector id_snowflake_core2
	if d.Node != 300 || d.Core != 3 || d.Counter != 1000 || d.UnixMs != 1735689600001 || layout.CounterCapacity() != 1024 {
		t.Errorf("decoded %+v, capacity %d", d, layout.CounterCapacity())
	}
}

func TestBehaviourPrefetch(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	server := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	opts := DefaultOptions()
	opts.Servers = []string{server.addr}
	opts.Timeout = answerTimeout
	opts.Prefetch = 64
	opts.IDsPerRequest = 16
	client := clientWith(t, opts, nil)
	// The refill goroutine starts filling at once; wait (bounded) until it has, so the check
	// below does not depend on four consumers draining faster than it is scheduled (a loaded
	// machine failed it once that way).
	for deadline := time.Now().Add(30 * time.Second); client.Counters().PrefetchRefills == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	seen := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				id, err := client.Next()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %d twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c := client.Counters(); len(seen) != 1000 || c.PrefetchRefills == 0 || c.PrefetchFailures != 0 {
		t.Errorf("%d IDs, counters %+v", len(seen), c)
	}
	client.Close()
	if _, err := client.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v (an ID left in the buffer was used)", err)
	}
	for _, r := range server.received() {
		if r.count > 16 {
			t.Errorf("asked for %d IDs, more than IDsPerRequest", r.count)
		}
	}
}

func TestBehaviourOptionsAndClose(t *testing.T) {
	counted(t)
	for _, change := range []func(*Options){
		func(o *Options) { o.Servers = nil },
		func(o *Options) { o.Servers = []string{"127.0.0.1"} },
		func(o *Options) { o.Servers = []string{"127.0.0.1:0"} },
		func(o *Options) { o.Timeout = 0 },
		func(o *Options) { o.Attempts = AttemptsMax + 1 },
		func(o *Options) { o.IDsPerRequest = CountMax + 1 },
		func(o *Options) { o.Prefetch = 1 },
		func(o *Options) { o.RetryWaitMax = 0 },
		func(o *Options) { o.RetryBudget = -time.Second },
		func(o *Options) { o.Poll = -time.Microsecond },
		func(o *Options) { o.Poll = PollMax + time.Microsecond },
	} {
		opts := DefaultOptions()
		change(&opts)
		if _, err := New(opts); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("options %+v: %v, want invalid_argument", opts, err)
		}
	}
	quiet := startFake(t, silent)
	opts := DefaultOptions()
	opts.Servers = []string{quiet.addr}
	opts.Timeout = TimeoutMax // closeDuringGet: a Get that Close did not end would wait it out
	client := clientWith(t, opts, nil)
	if _, err := client.Get(GetCountMax + 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Get above GetCountMax: %v", err)
	}
	closeDuringGet(t, client, quiet, "a Get waiting out a 60 s timeout")
	if _, err := client.Ping(); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after Close: %v", err)
	}
}

// Options.Poll: a waiting call reads without blocking before it blocks. What the client did is
// counted (exchange.blocked: the reads that may block in the runtime's poller), never how fast
// the server was or how the scheduler ran it:
//   - without polling every wait is a blocking read, and each ends with one datagram read or
//     the attempt's deadline: blocked == accepted + ignored + malformed answers + timeouts;
//   - with Poll = PollMax and an attempt timeout no longer than it, the poll goes on until the
//     attempt's deadline, so the blocking read is entered only once that has passed and
//     returns at once as the attempt's timeout: blocked == Timeouts. No read waited, and every
//     answer was found by a look without blocking, however slow the machine (a late answer
//     only adds a timeout and an attempt: 100 of them per call).
//
// The prefetch goroutine never polls. Close interrupts a polling wait.
func TestBehaviourPollFindsAnswersWithoutBlocking(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	server := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	seen := map[uint64]bool{}
	for _, poll := range []time.Duration{0, PollMax} {
		opts := DefaultOptions()
		opts.Servers = []string{server.addr}
		opts.Poll = poll
		opts.Timeout = PollMax
		opts.Attempts = AttemptsMax
		client := clientWith(t, opts, nil)
		for i := 0; i < 500; i++ {
			got, err := client.Get(1)
			if err != nil {
				t.Fatal(err)
			}
			if seen[got[0]] {
				t.Fatalf("ID %d twice", got[0])
			}
			seen[got[0]] = true
		}
		client.Close()
		c, blocked := client.Counters(), client.x.blocked.Load()
		t.Logf("poll %v: %d blocking reads for 500 calls; counters %+v", poll, blocked, c)
		if c.Responses != 500 || c.IDsReceived != 500 {
			t.Errorf("poll %v: counters %+v, want 500 answers of one ID", poll, c)
		}
		if poll == 0 {
			if read := c.Responses + c.IgnoredResponses + c.MalformedResponses; blocked != read+c.Timeouts {
				t.Errorf("without polling every wait must be a blocking read ending with a datagram or a timeout: "+
					"%d blocking reads, %d datagrams read, %d timeouts", blocked, read, c.Timeouts)
			}
		} else if blocked != c.Timeouts {
			t.Errorf("the polling client blocked: %d blocking reads, %d of them an attempt's end (timeouts)", blocked, c.Timeouts)
		}
	}

	// The refill goroutine blocks: its exchange never polls, whatever Options.Poll says. Nothing
	// but the refill goroutine uses this client, so its counters are the refills' alone, and they
	// add up as without polling (with at least one request). The wait for the first refill
	// (which starts at once) is bounded, not timed.
	opts := DefaultOptions()
	opts.Servers = []string{server.addr}
	opts.Timeout = answerTimeout
	opts.Poll = PollMax
	opts.Prefetch = 64
	opts.IDsPerRequest = 16
	prefetching := clientWith(t, opts, nil)
	deadline := time.Now().Add(30 * time.Second)
	for prefetching.Counters().PrefetchRefills == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Once PrefetchRefills is counted the refill is over and no exchange runs: stable counters.
	c, blocked := prefetching.Counters(), prefetching.x.blocked.Load()
	if read := c.Responses + c.IgnoredResponses + c.MalformedResponses; c.PrefetchRefills == 0 || c.Requests == 0 ||
		blocked != read+c.Timeouts {
		t.Errorf("the refill goroutine should have refilled with blocking reads only: %d blocking reads, counters %+v",
			blocked, c)
	}
	prefetching.Close()

	quiet := startFake(t, silent)
	opts = DefaultOptions()
	opts.Servers = []string{quiet.addr}
	opts.Timeout = TimeoutMax // closeDuringGet: a Get that Close did not end would wait it out
	opts.Poll = PollMax
	client := clientWith(t, opts, nil)
	// Closed once the server has the request: within its 10 ms poll or in the blocking read
	// after it, as the scheduler has it; either way the Get must end with ErrClosed.
	closeDuringGet(t, client, quiet, "a polling Get")
}

// ---- NOT_OWNER: a monotonic sequence served by one node of a cluster ----

// seqCluster is three seqNodes, nodes 1, 2 and 3, of the monotonic sequence "ledger" that node
// `owner` serves; the others answer NOT_OWNER naming it.
type seqCluster []*seqNode

func startSeqCluster(t *testing.T, owner uint32) seqCluster {
	return seqCluster{startSeqNode(t, 1, owner), startSeqNode(t, 2, owner), startSeqNode(t, 3, owner)}
}

// client is a client of the nodes at these indexes, in this order; answerTimeout per attempt, so
// a busy machine does not turn an answer into a timeout.
func (c seqCluster) client(t *testing.T, attempts int, nodes ...int) *Client {
	t.Helper()
	opts := DefaultOptions()
	opts.Servers = nil
	for _, i := range nodes {
		opts.Servers = append(opts.Servers, c[i].addr)
	}
	opts.Timeout = answerTimeout
	opts.Attempts = attempts
	return clientWith(t, opts, nil)
}

func (c seqCluster) notOwnerAnswers() int {
	n := 0
	for _, node := range c {
		n += node.notOwnerAnswers()
	}
	return n
}

func (c seqCluster) moveTo(owner uint32) {
	for _, node := range c {
		node.setOwner(owner)
	}
}

// wantSeq asks for len(want) numbers of "ledger" and checks they are want.
func wantSeq(t *testing.T, client *Client, want ...uint64) {
	t.Helper()
	got, err := client.GetSeq("ledger", len(want))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("numbers %v, want %v", got, want)
	}
}

func TestBehaviourNotOwnerIsFollowedToTheNamedNode(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, 3)
	// Node 3 is last in the list: the first call asks node 1 (NOT_OWNER, node 3), has not heard
	// from node 3 yet, asks node 2 (NOT_OWNER again), then node 3, which serves.
	client := cluster.client(t, 3, 0, 1, 2)
	wantSeq(t, client, 1, 2, 3, 4, 5)
	if n := cluster.notOwnerAnswers(); n != 2 {
		t.Errorf("%d NOT_OWNER answers, want 2", n)
	}
	// The client stays with the owner: no more NOT_OWNER.
	wantSeq(t, client, 6, 7, 8)
	if n := cluster.notOwnerAnswers(); n != 2 {
		t.Errorf("%d NOT_OWNER answers after a second call, want still 2", n)
	}
}

func TestBehaviourNotOwnerGoesStraightToAServerKnownAsTheOwner(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, 2)
	client := cluster.client(t, 3, 0, 1, 2)
	wantSeq(t, client, 1) // node 1, then node 2
	if n := cluster.notOwnerAnswers(); n != 1 {
		t.Errorf("%d NOT_OWNER answers, want 1", n)
	}
	// The sequence moves to node 1: node 2 now names it, and node 1 answered before, so the
	// client goes back to it directly (not on to node 3).
	cluster.moveTo(1)
	wantSeq(t, client, 1)
	if n := cluster[1].notOwnerAnswers(); n != 1 {
		t.Errorf("node 2 answered NOT_OWNER %d times, want 1", n)
	}
	if n := len(cluster[2].received()); n != 0 {
		t.Errorf("node 3 was asked %d times, want never", n)
	}
}

func TestBehaviourNotOwnerOfANodeOutsideTheListFailsNamingIt(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, 3)
	client := cluster.client(t, 3, 0, 1) // node 3 is not in the list
	got, err := client.GetSeq("ledger", 1)
	wantCode(t, err, ErrNotOwner, "node 3 does, and none of this client's servers answers as that node")
	if got != nil {
		t.Errorf("numbers %v with an error", got)
	}
	for i, want := range []int{1, 1, 0} { // each server asked once, then the call gives up
		if n := len(cluster[i].received()); n != want {
			t.Errorf("node %d asked %d times, want %d", i+1, n, want)
		}
	}
}

func TestBehaviourNoOwnerKnownWaitsWithinTheBudgetThenUsesTheAttempts(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, NotOwnerUnknown)
	opts := DefaultOptions()
	opts.Servers = []string{cluster[0].addr, cluster[1].addr}
	opts.Timeout = answerTimeout
	opts.Attempts = 4
	opts.RetryBudget = 200 * time.Millisecond // four waits of 50 ms without using an attempt, then the attempts
	client := clientWith(t, opts, nil)
	start := time.Now()
	_, err := client.GetSeq("ledger", 1)
	// A lower bound only: four real sleeps of 50 ms; a slow machine only makes it longer.
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("the call gave up after %v, want >= 200ms", took)
	}
	wantCode(t, err, ErrNotOwner, "no server could serve the request after 4 attempts: "+
		cluster[0].addr+" answered NOT_OWNER 4 times (no owner known); "+
		cluster[1].addr+" answered NOT_OWNER 4 times (no owner known)")
	if n := cluster.notOwnerAnswers(); n != 8 {
		t.Errorf("%d NOT_OWNER answers, want 8", n)
	}
	// Once an owner is chosen the next call finds it.
	cluster.moveTo(2)
	wantSeq(t, client, 1, 2)
}

func TestBehaviourAnOwnerChosenDuringTheWaitIsFound(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, NotOwnerUnknown)
	// Node 1 names itself twice (restarted inside its lease, its old owner key not yet
	// expired), then serves: the owner is chosen while the client waits, after the second
	// answer (counted by the server, not timed).
	cluster[0].setOwnerNotServing(1, 2)
	opts := DefaultOptions()
	opts.Servers = []string{cluster[0].addr}
	opts.Timeout = answerTimeout
	opts.Attempts = 3
	var waits []time.Duration
	client := clientWith(t, opts, &waits)
	wantSeq(t, client, 1, 2, 3)
	if n := cluster.notOwnerAnswers(); n != 2 {
		t.Errorf("%d NOT_OWNER answers, want 2", n)
	}
	if len(waits) != 2 || waits[0] != ownerMoveWait || waits[1] != ownerMoveWait {
		t.Errorf("waits %v, want 2 x %v (a server naming itself: a move under way)", waits, ownerMoveWait)
	}
	checkCounters(t, client, Counters{Requests: 3, Responses: 3, IDsReceived: 3})
}

func TestBehaviourAFencedServersOldNodeIdIsNotTakenForTheOwner(t *testing.T) {
	counted(t)
	// A lost node 7 (FENCED, its header still says 7); the third server is node 7 now and owns
	// the sequence.
	cluster := startSeqCluster(t, 7)
	oldSeven := startSeqNode(t, 7, 7)
	oldSeven.setFenced()
	newSeven := startSeqNode(t, 7, 7)
	client := seqCluster{oldSeven, cluster[1], newSeven}.client(t, DefaultOptions().Attempts, 0, 1, 2)
	wantSeq(t, client, 1, 2)
	if n := oldSeven.fencedAnswers(); n != 1 {
		t.Errorf("the fenced server answered %d times, want once (never asked as the owner)", n)
	}
}

func TestBehaviourAnEarlierCallsRecordsDoNotEndACallEarly(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, 3)
	client := cluster.client(t, DefaultOptions().Attempts, 0, 1) // node 3 is not in the list
	_, err := client.GetSeq("ledger", 1)
	wantCode(t, err, ErrNotOwner)
	if n := cluster.notOwnerAnswers(); n != 2 {
		t.Errorf("%d NOT_OWNER answers, want 2", n)
	}
	// The second call asks both again (either may be node 3 by now), not only the one it starts on.
	_, err = client.GetSeq("ledger", 1)
	wantCode(t, err, ErrNotOwner, "none of this client's servers answers as that node")
	if n := cluster.notOwnerAnswers(); n != 4 {
		t.Errorf("%d NOT_OWNER answers after a second call, want 4", n)
	}
}

func TestBehaviourUnknownSequenceEndsTheCall(t *testing.T) {
	counted(t)
	cluster := startSeqCluster(t, 1)
	client := cluster.client(t, 3, 0, 1, 2)
	_, err := client.GetSeq("tickets", 1)
	wantCode(t, err, ErrUnknownSequence, cluster[0].addr+" has no sequence 'tickets' (flurryctl seq create tickets)")
	if n := len(cluster[1].received()) + len(cluster[2].received()); n != 0 {
		t.Errorf("UNKNOWN_SEQUENCE failed over to %d more servers; another would answer the same", n)
	}
	for _, name := range []string{"", strings.Repeat("x", SeqNameSizeMax+1), "no spaces", "caf\u00e9"} {
		if _, err := client.GetSeq(name, 1); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("GetSeq(%q): %v, want invalid_argument", name, err)
		}
	}
}

// closeDuringGet starts client.Get(1), closes the client once `server` has received the
// request (a bounded wait: the Get is then waiting for its answer, or about to) and checks
// that the Get ends with ErrClosed within 20 s: far longer than any scheduling delay on a
// loaded machine, and still a third of the 60 s timeout (TimeoutMax) a Get that Close did not
// interrupt would wait out.
func closeDuringGet(t *testing.T, client *Client, server *fakeServer, what string) {
	t.Helper()
	result := make(chan error, 1)
	go func() { _, err := client.Get(1); result <- err }()
	for deadline := time.Now().Add(20 * time.Second); len(server.received()) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if len(server.received()) == 0 {
		t.Fatalf("%s: the server never received the request", what)
	}
	client.Close()
	select {
	case err := <-result:
		wantCode(t, err, ErrClosed)
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not interrupt %s", what)
	}
}
