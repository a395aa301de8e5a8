// protocol_behaviour_test.go — what the wire of issue 24 asks of a client, against fake
// servers: an answer is read only from the server asked (a forgery from another address with
// the right request id is never even read), request ids are unpredictable, a signed client
// learns a server's node from a wrong_server refusal and signs again without using an attempt
// (twice at most), a drained server is named apart from one that lost its node id, EXHAUSTED
// ends a call at once, and stale_timestamp is named as a clock problem.
package flurry

import (
	"errors"
	"math/bits"
	"net"
	"strings"
	"testing"
)

// The real answer waits until forgeries — well-formed OK answers echoing the request id, with
// IDs of another node — were sent to the client's port from two other addresses: the same IP
// on another port, and another IP (127.0.0.2) on the server's own port. The client's socket is
// connected to the server, so the kernel drops them: none is read, none is counted.
func TestBehaviourAnAnswerFromAnotherAddressIsNeverTaken(t *testing.T) {
	counted(t)
	server := startFake(t, silent) // answered by hand below
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{server.addr}, TimeoutMax, 1
	client := clientWith(t, opts, nil)
	type result struct {
		ids []uint64
		err error
	}
	got := make(chan result, 1)
	go func() {
		ids, err := client.Get(5)
		got <- result{ids, err}
	}()
	r := server.awaitRequests(t, 1)[0]
	to := server.client(0)
	forged := okRanges(r, Range{First: SnowflakeLayout().Compose(1000, 99, 0, 0), Count: r.count})
	serverPort := server.conn.LocalAddr().(*net.UDPAddr).Port
	for _, from := range []*net.UDPAddr{
		{IP: net.IPv4(127, 0, 0, 1)},                   // another port of the server's IP
		{IP: net.IPv4(127, 0, 0, 2), Port: serverPort}, // the server's port on another IP
	} {
		spoofer, err := net.ListenUDP("udp4", from)
		if err != nil {
			t.Fatalf("spoofer on %v: %v", from, err)
		}
		for i := 0; i < 20; i++ {
			if _, err := spoofer.WriteToUDP(forged, to); err != nil {
				t.Fatalf("spoofer: %v", err)
			}
		}
		spoofer.Close()
	}
	real := Range{First: SnowflakeLayout().Compose(1000, fakeNode, 0, 0), Count: r.count}
	server.send(t, okRanges(r, real), to)
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, id := range res.ids {
		if node := SnowflakeLayout().Decode(id).Node; node != fakeNode {
			t.Fatalf("ID %d of node %d taken: a forgery from another address", id, node)
		}
	}
	if c := client.Counters(); c.IgnoredResponses+c.MalformedResponses != 0 {
		t.Errorf("a datagram from another address reached the client: %+v", c)
	}
}

// Request ids are unpredictable: 500 attempts' ids are distinct, none follows another by one
// (a counter lets anyone who saw one request answer the next ones ahead of time), and their
// 32,000 bits are about half ones (a random source gives 16,000 +- a few hundred; the bound is
// more than 10 standard deviations wide).
func TestBehaviourRequestIdsAreUnpredictable(t *testing.T) {
	counted(t)
	ids := newIDSource(1, 4096)
	server := startFake(t, func(r request, before []request) [][]byte { return [][]byte{ids.answer(r)} })
	client := newTestClient(t, nil, server.addr)
	for i := 0; i < 500; i++ {
		if _, err := client.Next(); err != nil {
			t.Fatal(err)
		}
	}
	seen := server.received()
	if len(seen) != 500 {
		t.Fatalf("%d requests, want 500", len(seen))
	}
	distinct, ones := map[uint64]bool{}, 0
	for i, r := range seen {
		distinct[r.id] = true
		ones += bits.OnesCount64(r.id)
		if i > 0 && r.id == seen[i-1].id+1 {
			t.Errorf("request ids %d and %d are consecutive", seen[i-1].id, r.id)
		}
	}
	if len(distinct) != len(seen) {
		t.Errorf("%d distinct request ids of %d", len(distinct), len(seen))
	}
	if ones < 15_000 || ones > 17_000 {
		t.Errorf("%d of 32,000 request id bits are set: not a random source", ones)
	}
}

// A signed client's first GET_IDS to a server names no node: refused wrong_server (signed,
// naming node 5), it is signed again for node 5 at once, without using an attempt (one attempt
// is all it has). The second call names node 5 from the start.
func TestBehaviourTheFirstSignedRequestLearnsTheServersNode(t *testing.T) {
	counted(t)
	server := signedServer(t, newIDSource(1, 4096))
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts, opts.Key = []string{server.addr}, answerTimeout, 1, testKey()
	client := clientWith(t, opts, nil)
	if _, err := client.Get(5); err != nil {
		t.Fatal(err)
	}
	if c := client.Counters(); c.Requests != 2 || server.wrongServerAnswers() != 1 {
		t.Errorf("%d requests, %d refused wrong_server: want 2 (one for any server, one for node 5) and 1",
			c.Requests, server.wrongServerAnswers())
	}
	if _, err := client.Get(5); err != nil {
		t.Fatal(err)
	}
	if c := client.Counters(); c.Requests != 3 || server.wrongServerAnswers() != 1 || c.UnverifiedResponses != 0 {
		t.Errorf("the node is known now: counters %+v, %d refused wrong_server", c, server.wrongServerAnswers())
	}
	for _, r := range server.received() {
		if r.server != fakeNode {
			t.Errorf("a request served for node %d, not %d", r.server, fakeNode)
		}
	}
}

// A server that keeps naming another node (each signed again for) is refused as any
// UNAUTHORIZED after two re-signs: three wrong_server answers, one attempt, no more.
func TestBehaviourWrongServerIsSignedAgainTwiceAtMost(t *testing.T) {
	counted(t)
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		h := answerTo(r, StatusUnauthorized, errWrongServer)
		h.Node = uint16(6 + len(before)) // never the node the request names
		return [][]byte{signAnswer(encodeResponse(h, nil, nil), r, testKey())}
	})
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts, opts.Key = []string{server.addr}, answerTimeout, 1, testKey()
	client := clientWith(t, opts, nil)
	_, err := client.Get(1)
	wantCode(t, err, ErrUnauthorized, "(wrong_server)", "kept naming another node id")
	if c := client.Counters(); c.Requests != 3 {
		t.Errorf("%d requests, want 3: the first and two re-signs", c.Requests)
	}
	// An unsigned wrong_server (anyone could send it) is never followed: the attempt waits on.
	forger := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		return [][]byte{statusAnswer(r, StatusUnauthorized, errWrongServer)}
	})
	opts.Servers = []string{forger.addr}
	forged := clientWith(t, opts, nil)
	_, err = forged.Get(1)
	wantCode(t, err, ErrUnauthorized, "an unsigned UNAUTHORIZED (wrong_server) came back")
}

// FENCED detail 1: the server is draining (its operator is stopping it). A call whose every
// FENCED answer was a drain fails ErrDraining; with a lost server (detail 0, or any value but
// 1) among them it fails ErrFenced naming both.
func TestBehaviourADrainedServerIsNamedDraining(t *testing.T) {
	counted(t)
	fencedWith := func(detail uint32) *fakeServer {
		return startFake(t, func(r request, before []request) [][]byte {
			return [][]byte{statusAnswer(r, StatusFenced, detail)}
		})
	}
	drained := fencedWith(FencedDraining)
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{drained.addr}, answerTimeout, 2
	_, err := clientWith(t, opts, nil).Get(1)
	wantCode(t, err, ErrDraining, drained.addr+" answered FENCED 2 times (draining: its operator is stopping it)")
	if strings.Contains(err.Error(), "holds no node id") {
		t.Errorf("a drained server named as one without a node id: %v", err)
	}
	for _, detail := range []uint32{FencedLost, 7} {
		lost := fencedWith(detail)
		opts.Servers = []string{drained.addr, lost.addr}
		_, err = clientWith(t, opts, nil).Get(1)
		wantCode(t, err, ErrFenced, drained.addr+" answered FENCED once (draining: its operator is stopping it)",
			lost.addr+" answered FENCED once (it holds no node id: lost, or not yet claimed)")
	}
}

// EXHAUSTED: no server of this layout (or for this sequence) can issue again. The call fails
// at once and asks no other server, whatever attempts are left.
func TestBehaviourExhaustedFailsAtOnce(t *testing.T) {
	counted(t)
	exhausted := startFake(t, func(r request, before []request) [][]byte {
		return [][]byte{statusAnswer(r, StatusExhausted, 0)}
	})
	other := startFake(t, silent)
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{exhausted.addr, other.addr}, answerTimeout, 5
	client := clientWith(t, opts, nil)
	_, err := client.Get(1)
	wantCode(t, err, ErrExhausted, exhausted.addr+" answered EXHAUSTED to GET_IDS", "time field has run out")
	_, err = client.GetSeq("ledger", 1)
	wantCode(t, err, ErrExhausted, "the sequence 'ledger' has reached 2^63")
	checkCounters(t, client, Counters{Requests: 2, Responses: 2})
	if n := len(other.received()); n != 0 {
		t.Errorf("EXHAUSTED failed over to another server %d times", n)
	}
	if !errors.Is(err, ErrExhausted) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("error %v", err)
	}
}

// stale_timestamp is answered signed: the client can trust it, and names the clocks.
func TestBehaviourStaleTimestampIsNamedAsAClockProblem(t *testing.T) {
	counted(t)
	server := startFakeWithKey(t, testKey(), func(r request, before []request) [][]byte {
		return [][]byte{signAnswer(statusAnswer(r, StatusUnauthorized, errStaleTimestamp), r, testKey())}
	})
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts, opts.Key = []string{server.addr}, answerTimeout, 3, testKey()
	_, err := clientWith(t, opts, nil).Info()
	wantCode(t, err, ErrUnauthorized, "(stale_timestamp)", "check both clocks (NTP)")
	if n := len(server.received()); n != 1 {
		t.Errorf("%d requests: a signed stale_timestamp ends the call", n)
	}
}
