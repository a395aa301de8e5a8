// fakeserver_test.go — a scripted UDP server for the behaviour tests, and the server side of
// the wire format it needs (request decoding by PROTOCOL.md "Request errors", response
// encoding, checking signed requests and signing answers), which the vector test also checks
// against PROTOCOL.md.
package flurry

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// request is what a fake server read from a request datagram.
type request struct {
	opcode  uint8
	flags   uint16
	count   uint32
	id      uint64
	size    int
	name    string // GET_SEQ
	trailer        // a signed request's (fakeServer.key)
}

// trailer is the end of a signed request.
type trailer struct {
	keyID       uint32
	server      uint32 // the node id the request is for, or AnyServer
	timestampUs uint64
	mac         [MacSize]byte
}

// decodeRequest checks a request in the order of PROTOCOL.md "Request errors" and returns the
// RequestError name ("ok" or the first failure).
func decodeRequest(b []byte) (request, string) {
	if len(b) < RequestHeaderSize {
		return request{}, "too_short"
	}
	r := request{opcode: b[3], flags: binary.BigEndian.Uint16(b[4:]), count: binary.BigEndian.Uint32(b[8:]),
		id: binary.BigEndian.Uint64(b[12:]), size: len(b)}
	op := Opcode(r.opcode)
	bodyEnd, nameError := RequestHeaderSize, ""
	if op == OpGetSeq {
		bodyEnd, nameError = decodeSeqName(b, &r)
	}
	trailing := false
	for _, c := range b[bodyEnd:] {
		trailing = trailing || c != 0
	}
	issues := op == OpGetIDs || op == OpGetSeq
	switch {
	case binary.BigEndian.Uint16(b) != Magic:
		return r, "bad_magic"
	case len(b) > DatagramSizeMax:
		return r, "too_long"
	case r.opcode&opcodeResponseBit != 0:
		return r, "is_response"
	case b[2] != ProtocolVersion:
		return r, "bad_version"
	case op != OpGetIDs && op != OpPing && op != OpInfo && op != OpGetSeq:
		return r, "bad_opcode"
	case r.flags&^flagAuth != 0:
		return r, "bad_flags"
	case binary.BigEndian.Uint16(b[6:]) != 0:
		return r, "reserved_nonzero"
	case r.flags&flagAuth != 0 && len(b) < SignedRequestSizeMin:
		return r, "trailer_short" // no room for the 24-byte auth trailer
	case r.flags&flagAuth != 0:
		return r, "auth_unsupported" // this fake server runs with --auth off
	case nameError != "":
		return r, nameError
	case trailing:
		return r, "trailing_bytes"
	case issues && r.count == 0:
		return r, "count_zero"
	case issues && r.count > CountMax:
		return r, "count_too_large"
	case !issues && r.count != 0:
		return r, "count_unexpected"
	}
	return r, "ok"
}

// decodeSeqName reads the GET_SEQ body: where the padding starts and the name's error, if any.
func decodeSeqName(b []byte, r *request) (int, string) {
	if len(b) <= RequestHeaderSize || b[RequestHeaderSize] == 0 {
		return RequestHeaderSize, "name_missing"
	}
	size := int(b[RequestHeaderSize])
	end := RequestHeaderSize + 1 + size
	switch {
	case size > SeqNameSizeMax:
		return RequestHeaderSize, "name_too_long"
	case len(b) < end:
		return RequestHeaderSize, "name_truncated"
	}
	for _, c := range b[RequestHeaderSize+1 : end] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return RequestHeaderSize, "name_bad"
		}
	}
	r.name = string(b[RequestHeaderSize+1 : end])
	return end, ""
}

// checkSigned is what a server with `key` checks of a signed request before decoding it
// (PROTOCOL.md "Authentication": flag, trailer, key id, MAC; the clock, the server field and
// replays are not checked here: fakeServer.serve checks the server field). It returns the
// request without its trailer and flag, for decodeRequest, and the trailer's fields; "" or why
// the request is refused.
func checkSigned(b []byte, key *Key) ([]byte, trailer, string) {
	var t trailer
	switch {
	case len(b) < RequestHeaderSize || binary.BigEndian.Uint16(b[4:])&flagAuth == 0:
		return nil, t, "auth_required"
	case len(b) < SignedRequestSizeMin:
		return nil, t, "trailer_short"
	}
	at := len(b) - AuthTrailerSize
	t.keyID = binary.BigEndian.Uint32(b[at:])
	t.server = binary.BigEndian.Uint32(b[at+4:])
	t.timestampUs = binary.BigEndian.Uint64(b[at+8:])
	copy(t.mac[:], b[at+16:])
	if t.keyID != key.ID {
		return nil, t, "unknown_key"
	}
	if siphash24(&key.Secret, b[:len(b)-MacSize]) != t.mac {
		return nil, t, "bad_mac"
	}
	unsigned := append([]byte(nil), b[:at]...)
	binary.BigEndian.PutUint16(unsigned[4:], binary.BigEndian.Uint16(b[4:])&^flagAuth)
	return unsigned, t, ""
}

// signAnswer is answer followed by its MAC for the request r (whose trailer holds its MAC).
func signAnswer(answer []byte, r request, key *Key) []byte {
	mac := answerMac(answer, r.mac, key)
	return append(append([]byte(nil), answer...), mac[:]...)
}

// encodeResponse writes a header (opcode without the response bit), then the ranges or, when
// info is not nil, the INFO body.
func encodeResponse(h ResponseHeader, ranges []Range, info *Info) []byte {
	out := make([]byte, ResponseHeaderSize, ResponseHeaderSize+len(ranges)*RangeSize+InfoBodySize)
	binary.BigEndian.PutUint16(out[0:], Magic)
	out[2] = ProtocolVersion
	out[3] = h.Opcode | opcodeResponseBit
	out[4] = uint8(h.Status)
	out[5] = h.RangeCount
	binary.BigEndian.PutUint16(out[6:], h.Node)
	binary.BigEndian.PutUint64(out[8:], h.RequestID)
	binary.BigEndian.PutUint32(out[16:], h.Detail)
	for _, r := range ranges {
		out = binary.BigEndian.AppendUint64(out, r.First)
		out = binary.BigEndian.AppendUint32(out, r.Count)
	}
	if info != nil {
		out = binary.BigEndian.AppendUint64(out, info.EpochMs)
		out = binary.BigEndian.AppendUint16(out, info.TimeUnitMs)
		out = append(out, info.TimeBits, info.NodeBits, info.SequenceBits, info.CoreBits, info.CoreFrom, info.Workers)
	}
	return out
}

// answerTo is a response header echoing r with `status` and `detail`.
func answerTo(r request, status Status, detail uint32) ResponseHeader {
	return ResponseHeader{Opcode: r.opcode, Status: status, Node: fakeNode, RequestID: r.id, Detail: detail}
}

// okRanges is an OK GET_IDS answer to r carrying ranges.
func okRanges(r request, ranges ...Range) []byte {
	h := answerTo(r, StatusOK, 0)
	h.RangeCount = uint8(len(ranges))
	return encodeResponse(h, ranges, nil)
}

// statusAnswer is a bare answer to r (RETRY, FENCED, BAD_REQUEST, OK PING).
func statusAnswer(r request, status Status, detail uint32) []byte {
	return encodeResponse(answerTo(r, status, detail), nil, nil)
}

// fakeServer answers each request with whatever its handler returns (nothing: silence).
type fakeServer struct {
	addr     string
	conn     *net.UDPConn
	mu       sync.Mutex
	requests []request
	handle   func(r request, before []request) [][]byte // before: the requests received earlier
	done     chan struct{}
	// Not nil: every request must be signed with this key (else an error of the test); the
	// handler signs its answers (signAnswer) or, to test the client, does not. A signed
	// GET_IDS or GET_SEQ for another node than fakeNode (AnyServer included) is answered
	// UNAUTHORIZED wrong_server, signed, naming fakeNode, as flurryd does, and counted in
	// wrongServer; the handler never sees it.
	key         *Key
	wrongServer int
	clients     []*net.UDPAddr // the source of every request, in order
}

// fakeNode is the node id every fake server answers as, unless its handler says otherwise.
const fakeNode = 5

func startFake(t *testing.T, handle func(r request, before []request) [][]byte) *fakeServer {
	t.Helper()
	return startFakeWithKey(t, nil, handle)
}

// startFakeWithKey is startFake for a server that requires requests signed with key.
func startFakeWithKey(t *testing.T, key *Key, handle func(r request, before []request) [][]byte) *fakeServer {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("fake server: %v", err)
	}
	s := &fakeServer{addr: conn.LocalAddr().String(), conn: conn, handle: handle, done: make(chan struct{}), key: key}
	go s.serve(t)
	t.Cleanup(func() {
		conn.Close()
		<-s.done
	})
	return s
}

func (s *fakeServer) serve(t *testing.T) {
	defer close(s.done)
	buffer := make([]byte, 2048)
	for {
		n, from, err := s.conn.ReadFromUDP(buffer)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		datagram, signed := buffer[:n], trailer{}
		if s.key != nil {
			var refused string
			if datagram, signed, refused = checkSigned(datagram, s.key); refused != "" {
				t.Errorf("fake server %s: the client sent a request refused as %s", s.addr, refused)
				continue
			}
		}
		r, decoded := decodeRequest(datagram)
		r.size, r.trailer = n, signed
		if decoded != "ok" {
			t.Errorf("fake server %s: the client sent a request that decodes as %s", s.addr, decoded)
			continue
		}
		if op := Opcode(r.opcode); s.key != nil && (op == OpGetIDs || op == OpGetSeq) && r.server != fakeNode {
			s.mu.Lock()
			s.wrongServer++
			s.mu.Unlock()
			s.conn.WriteToUDP(signAnswer(statusAnswer(r, StatusUnauthorized, errWrongServer), r, s.key), from) //nolint:errcheck
			continue
		}
		s.mu.Lock()
		before := append([]request(nil), s.requests...)
		s.requests = append(s.requests, r)
		s.clients = append(s.clients, from)
		s.mu.Unlock()
		for _, datagram := range s.handle(r, before) {
			s.conn.WriteToUDP(datagram, from) //nolint:errcheck // the client may be gone
		}
	}
}

func (s *fakeServer) received() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

// send sends a datagram from the server's socket (a late answer, say).
func (s *fakeServer) send(t *testing.T, datagram []byte, to *net.UDPAddr) {
	t.Helper()
	if _, err := s.conn.WriteToUDP(datagram, to); err != nil {
		t.Fatalf("fake server %s: %v", s.addr, err)
	}
}

// awaitRequests waits (at most 10 s) until the server has received n requests.
func (s *fakeServer) awaitRequests(t *testing.T, n int) []request {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(s.received()) < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	got := s.received()
	if len(got) < n {
		t.Fatalf("fake server %s: %d requests within 10 s, want %d", s.addr, len(got), n)
	}
	return got
}

// wrongServerAnswers is how many signed requests were refused wrong_server.
func (s *fakeServer) wrongServerAnswers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wrongServer
}

// client is the address the n-th request (0-based) came from.
func (s *fakeServer) client(n int) *net.UDPAddr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[n]
}

// seqNode is a fake server as one node of a cluster serving the monotonic sequence "ledger":
// its node id is in every answer's header; while the sequence's owner (setOwner: switchable
// at run time) is its node it issues 1, 2, 3, ... in order, otherwise it answers NOT_OWNER
// naming the owner (NotOwnerUnknown: none known). After setOwnerNotServing(owner, k) its next k
// answers are NOT_OWNER naming the owner even when that is itself (a restarted owner whose old
// owner key has not expired yet), and then it serves: the owner is chosen after the k-th answer,
// counted, not after some time. Fenced (setFenced) it answers FENCED, its header still naming
// its node (a server that lost its node id). Another name gets UNKNOWN_SEQUENCE. It answers
// GET_SEQ only.
type seqNode struct {
	*fakeServer
	node       uint16
	mu         sync.Mutex
	owner      uint32
	notServing int // NOT_OWNER answers still to give naming owner even when it is this node
	fenced     bool
	next       uint64
	notOwner   int // NOT_OWNER answers sent
	fencedSent int // FENCED answers sent
}

func startSeqNode(t *testing.T, node uint16, owner uint32) *seqNode {
	n := &seqNode{node: node, owner: owner, next: 1}
	n.fakeServer = startFake(t, n.handle)
	return n
}

func (n *seqNode) setOwner(owner uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owner, n.notServing = owner, 0
}

// setOwnerNotServing names owner in the next `answers` NOT_OWNER answers even when it is this
// node, then serves.
func (n *seqNode) setOwnerNotServing(owner uint32, answers int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owner, n.notServing = owner, answers
}

func (n *seqNode) setFenced() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fenced = true
}

func (n *seqNode) fencedAnswers() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fencedSent
}

func (n *seqNode) notOwnerAnswers() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notOwner
}

func (n *seqNode) handle(r request, before []request) [][]byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := answerTo(r, StatusOK, 0)
	h.Node = n.node
	var ranges []Range
	switch {
	case r.name != "ledger":
		h.Status = StatusUnknownSeq
	case n.fenced:
		h.Status = StatusFenced
		n.fencedSent++
	case n.owner != uint32(n.node) || n.notServing > 0:
		h.Status, h.Detail = StatusNotOwner, n.owner
		n.notOwner++
		if n.owner == uint32(n.node) {
			n.notServing--
		}
	default:
		ranges = []Range{{First: n.next, Count: r.count}}
		h.RangeCount = 1
		n.next += uint64(r.count)
	}
	return [][]byte{encodeResponse(h, ranges, nil)}
}

// silent never answers.
func silent(request, []request) [][]byte { return nil }

// answerTimeout is the attempt timeout of every test client whose answers must come in time:
// a fake server in this process answers in microseconds, and even on a loaded 2-CPU machine
// far within a second, so an answer never turns into a timeout (nor into an ignored or
// unverified late answer) and the exact counters the tests check hold. Only a test whose
// server stays silent (or answers what the client must not accept) waits it out; a test about
// the timeout itself, where no server answers at all, uses a short one.
const answerTimeout = time.Second

// newTestClient is a client of `servers`, answerTimeout per attempt, 3 attempts (see clientWith).
func newTestClient(t *testing.T, waits *[]time.Duration, servers ...string) *Client {
	t.Helper()
	opts := DefaultOptions()
	opts.Servers = servers
	opts.Timeout = answerTimeout
	opts.Attempts = 3
	return clientWith(t, opts, waits)
}

// clientWith is a client closed at the end of the test. With waits, its sleeps (RETRY
// back-off) are recorded there and still slept, capped at 1 ms, so time moves on.
func clientWith(t *testing.T, opts Options, waits *[]time.Duration) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if waits != nil {
		real := c.x.sleep
		c.x.sleep = func(d time.Duration, cancel <-chan struct{}) wake {
			*waits = append(*waits, d)
			if d > time.Millisecond {
				d = time.Millisecond
			}
			return real(d, cancel)
		}
	}
	return c
}
