// exchange.go — one request/answer with failover, per-attempt timeout, RETRY back-off and
// answer validation (the C++ client's client/exchange.cc, rule for rule).
//
// Contract:
//   - One UDP socket per server, connected to it (net.DialUDP): the kernel delivers to it only
//     datagrams whose source is that server's address and port, so an answer is only ever read
//     from the server asked (PROTOCOL.md "What a client can be sure of"). Every attempt carries
//     a fresh, unpredictable request id from crypto/rand (read in blocks; never a counter).
//   - run() sends to the current server; a timeout, a failed send and FENCED use an attempt
//     and move to the next server (the client stays there for later calls); RETRY sleeps the
//     hint clamped to RetryWaitMin..RetryWaitMax and asks the same server again without using
//     an attempt, until RetryBudget of sleeping would be exceeded; BAD_REQUEST and
//     UNAUTHORIZED end the exchange (another server would answer the same), but for a signed
//     UNAUTHORIZED wrong_server: the verified answer names the server's node id, and the
//     request is signed again for it and sent to the same server at once, without using an
//     attempt (at most twice in a row). EXHAUSTED ends the exchange (no server can ever issue
//     those IDs again).
//   - FENCED's detail says why: 1 draining (its operator is stopping it), else it holds no
//     node id. When the attempts run out and every FENCED answer was draining the error is
//     ErrDraining, else ErrFenced.
//   - NOT_OWNER (GET_SEQ of a monotonic sequence another node serves) uses an attempt and asks
//     the server last heard answering as the node it names (every accepted answer's header
//     names its node; FENCED answers do not count), else the next server, whose answer teaches
//     its node; when every server answered during this exchange and none is the owner (or the
//     attempts run out) the exchange fails ErrNotOwner. With no owner known (or a server
//     naming itself: a move under way) it sleeps ownerMoveWait, within RetryBudget (the budget
//     RETRY uses), and asks the next server without using an attempt. UNKNOWN_SEQUENCE ends
//     the exchange.
//   - Every datagram received while waiting is checked by accept(): PROTOCOL.md rules 1..12
//     (DecodeResponse), then 13 (request id: else ignored_responses), 14 and 15 (opcode, no
//     more IDs than asked: else malformed_responses). A rejected datagram is dropped whole and
//     the wait goes on until the attempt's deadline.
//   - With a key (Options.Key) every attempt is signed anew (encode: for the node id the
//     server last answered as, or AnyServer; a fresh timestamp, so a fresh MAC; a retransmitted
//     copy would be a replay) and accept() first verifies the answer's MAC (verifyAnswer), else
//     counts it in unverified_responses and drops it. An unsigned UNAUTHORIZED is such a
//     datagram: anyone on the path could send it, so it is only remembered, and named if the
//     attempts run out.
//   - The call's context (watch): every wait of the exchange — for an answer, a RETRY or
//     NOT_OWNER back-off, a pause after a failed send — ends as soon as the context is done,
//     and the exchange fails ErrCanceled wrapping ctx.Err(). A blocked read is woken by moving
//     its socket's read deadline into the past (watchMu orders that against the arming of the
//     attempt's deadline, so a cancel is never lost). Nothing of an answer that comes after is
//     used: the next attempt has another request id.
//   - Not goroutine-safe: the Client serializes watch(), run() and fetch() under Client.io;
//     counters may be read from any goroutine.

package flurry

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sendFailurePause: after a send that fails at once (no route), so attempts are not spun through.
const sendFailurePause = time.Millisecond

// ownerMoveWait: NOT_OWNER with no owner known. A sequence's owner is settled within a second
// or so (the servers' sync period), so ask again after this, within Options.RetryBudget.
const ownerMoveWait = 50 * time.Millisecond

// resignMax: wrong_server answers in a row that are signed again for the node they name.
const resignMax = 2

// longAgo is a read deadline in the past: it wakes a blocked read at once.
var longAgo = time.Unix(1, 0)

type counters struct {
	requests, responses, retries, timeouts, fenced, ignored, malformed, sendErrors, ids, unverified atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Requests: c.requests.Load(), Responses: c.responses.Load(), Retries: c.retries.Load(),
		Timeouts: c.timeouts.Load(), Fenced: c.fenced.Load(), IgnoredResponses: c.ignored.Load(),
		MalformedResponses: c.malformed.Load(), SendErrors: c.sendErrors.Load(), IDsReceived: c.ids.Load(),
		UnverifiedResponses: c.unverified.Load(),
	}
}

type step uint8

const (
	stepAnswered step = iota
	stepSameServer
	stepResign // signed again for the node the server named: the attempt is not used up
	stepNextServer
	stepOtherServer // after a wait for an owner: the next server, the attempt not used up
	stepOwnerServer // after NOT_OWNER: to x.ownerServer
	stepFailed
)

type waitResult uint8

const (
	waitAnswer waitResult = iota
	waitTimeout
	waitClosed
	waitCanceled
)

// wake is why a sleep ended.
type wake uint8

const (
	wakeTimer wake = iota
	wakeClosed
	wakeCanceled
)

// nodeUnknown is exchange.serverNode's entry for a server that has not answered yet; a signed
// request to it names AnyServer (the same value).
const nodeUnknown = AnyServer

// failure is one failed attempt, for the error message.
type failure struct {
	kind   string // "timeout", "fenced", "draining", "send" or "notOwner"
	server int
	err    error  // send: why
	owner  uint32 // notOwner: the node it named, or NotOwnerUnknown
}

// answer is the accepted answer to the last exchange (status OK).
type answer struct {
	response Response
	server   int
	rtt      time.Duration
}

// requestIDs are unpredictable request ids: 8 bytes each of crypto/rand, read 64 ids at a time.
type requestIDs struct {
	block [512]byte
	used  int
}

func newRequestIDs() requestIDs { return requestIDs{used: len(requestIDs{}.block)} }

func (r *requestIDs) next() (uint64, error) {
	if r.used == len(r.block) {
		if _, err := rand.Read(r.block[:]); err != nil {
			return 0, newError(CodeSystem, fmt.Sprintf("the system's random source failed: %v", err))
		}
		r.used = 0
	}
	id := binary.BigEndian.Uint64(r.block[r.used:])
	r.used += 8
	return id, nil
}

type exchange struct {
	opts      *Options
	conns     []*net.UDPConn                                     // one per server, connected to it
	sleep     func(d time.Duration, cancel <-chan struct{}) wake // tests wrap it
	current   int                                                // the server asked first; moves on timeout, failed send, FENCED, NOT_OWNER
	ids       requestIDs
	receive   []byte    // one byte more than any valid datagram: oversize is seen
	failures  []failure // of the current exchange
	answer    answer
	counters  counters
	raws      []syscall.RawConn // the sockets for non-blocking reads; nil unless Options.Poll
	refilling bool              // the prefetch goroutine's exchange: it never polls
	blocked   atomic.Uint64     // waits that blocked in the runtime's poller (tests read it)

	key        *Key          // nil: unsigned
	requestMac [MacSize]byte // signed: the MAC of the request outstanding
	// The RequestError of the last unsigned UNAUTHORIZED of this exchange (0: none), named
	// only if the attempts run out: it cannot be trusted.
	unsignedRefusal uint32
	resigned        int // wrong_server answers in a row, each signed again

	seqName     string // GET_SEQ: the sequence fetchSeq asks for
	ownerServer int    // stepOwnerServer: where NOT_OWNER pointed
	// The node each server last answered as (its header's node); nodeUnknown until it answers.
	serverNode []uint32
	heard      []bool // which servers answered during the current exchange

	// The context of the call in progress (watch); context.Background() between calls.
	ctx      context.Context
	canceled atomic.Bool // ctx is done: set by the watcher before it wakes the read
	watchMu  sync.Mutex  // orders arming a read deadline against the watcher's wake-up
}

func newExchange(opts *Options, conns []*net.UDPConn, sleep func(time.Duration, <-chan struct{}) wake) *exchange {
	x := &exchange{opts: opts, conns: conns, sleep: sleep, key: opts.Key, ids: newRequestIDs(),
		receive: make([]byte, DatagramSizeMax+1), serverNode: make([]uint32, len(conns)),
		heard: make([]bool, len(conns)), ctx: context.Background()}
	for i := range x.serverNode {
		x.serverNode[i] = nodeUnknown
	}
	return x
}

func (x *exchange) name(server int) string { return x.opts.Servers[server] }

// watch makes ctx the context of the exchanges until the returned stop is called (the caller
// holds Client.io throughout). A context that can end gets a goroutine that, once it does,
// marks the exchange canceled and wakes a read in flight; stop ends it and waits for it, so it
// never touches a later call.
func (x *exchange) watch(ctx context.Context) (stop func()) {
	x.ctx = ctx
	x.canceled.Store(false)
	done := ctx.Done()
	if done == nil { // context.Background() and the like never end
		return func() { x.ctx = context.Background() }
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			x.watchMu.Lock()
			x.canceled.Store(true)
			for _, conn := range x.conns {
				conn.SetReadDeadline(longAgo) //nolint:errcheck // a closed socket wakes its read anyway
			}
			x.watchMu.Unlock()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-finished
		x.ctx = context.Background()
	}
}

// canceledError is the error of an exchange whose context ended while it was `doing`.
func (x *exchange) canceledError(op Opcode, server int, doing string) error {
	cause := x.ctx.Err()
	if cause == nil { // canceled is set only once ctx is done; never nil in practice
		cause = context.Canceled
	}
	return &Error{Code: CodeCanceled, cause: cause,
		Message: fmt.Sprintf("%v to %s stopped %s: %v", op, x.name(server), doing, cause)}
}

// pause sleeps d unless the client closes or the call's context ends first.
func (x *exchange) pause(d time.Duration, op Opcode, server int, doing string) error {
	switch x.sleep(d, x.ctx.Done()) {
	case wakeClosed:
		return errClosed()
	case wakeCanceled:
		return x.canceledError(op, server, doing)
	}
	return nil
}

// run is one exchange: nil when an OK answer is in x.answer.
func (x *exchange) run(op Opcode, count uint32, size int) error {
	x.failures = x.failures[:0]
	x.unsignedRefusal = 0
	x.resigned = 0
	for i := range x.heard {
		x.heard[i] = false
	}
	var retryWaited time.Duration
	for attempt := 0; attempt < x.opts.Attempts; {
		s, err := x.attempt(op, count, size, &retryWaited)
		switch s {
		case stepAnswered:
			return nil
		case stepFailed:
			return err
		case stepSameServer, stepResign: // after RETRY, or signed again: the attempt is not used up
		case stepOtherServer: // after a wait for an owner: the attempt is not used up
			x.current = (x.current + 1) % len(x.conns)
		case stepNextServer:
			x.current = (x.current + 1) % len(x.conns)
			attempt++
		case stepOwnerServer:
			x.current = x.ownerServer
			attempt++
		}
	}
	return x.failAttempts()
}

// attempt sends one request to the current server and waits for its answer.
func (x *exchange) attempt(op Opcode, count uint32, size int, retryWaited *time.Duration) (step, error) {
	server := x.current
	if x.canceled.Load() || x.ctx.Err() != nil {
		return stepFailed, x.canceledError(op, server, "before it was sent")
	}
	id, err := x.ids.next()
	if err != nil {
		return stepFailed, err
	}
	request := x.encode(op, count, id, size, server)
	sent := time.Now()
	x.counters.requests.Add(1)
	if _, err := x.conns[server].Write(request); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return stepFailed, errClosed()
		}
		x.counters.sendErrors.Add(1)
		x.failures = append(x.failures, failure{kind: "send", server: server, err: err})
		if err := x.pause(sendFailurePause, op, server, "after a failed send"); err != nil {
			return stepFailed, err
		}
		return stepNextServer, nil
	}
	response, w := x.await(server, op, count, id, sent.Add(x.opts.Timeout))
	switch w {
	case waitClosed:
		return stepFailed, errClosed()
	case waitCanceled:
		return stepFailed, x.canceledError(op, server, "while waiting for its answer")
	case waitTimeout:
		x.counters.timeouts.Add(1)
		x.failures = append(x.failures, failure{kind: "timeout", server: server})
		return stepNextServer, nil
	}
	x.counters.responses.Add(1)
	x.answer = answer{response: response, server: server, rtt: time.Since(sent)}
	x.noteNode(server, response.Header)
	h := response.Header
	wrongServer := h.Status == StatusUnauthorized && h.Detail == errWrongServer
	if !wrongServer {
		x.resigned = 0
	}
	switch h.Status {
	case StatusOK:
		return stepAnswered, nil
	case StatusRetry:
		return x.onRetry(op, server, h.Detail, retryWaited)
	case StatusFenced:
		x.counters.fenced.Add(1)
		kind := "fenced"
		if h.Detail == FencedDraining {
			kind = "draining"
		}
		x.failures = append(x.failures, failure{kind: kind, server: server})
		return stepNextServer, nil
	case StatusNotOwner:
		return x.onNotOwner(op, server, h, retryWaited)
	case StatusUnauthorized:
		// Signed for a node id this server does not serve (the first request to it, or the node
		// moved): the verified answer named its node (noteNode), so sign again for it, once or
		// twice; a server that keeps naming another node is refused as any UNAUTHORIZED.
		if wrongServer && x.key != nil && x.resigned < resignMax {
			x.resigned++
			return stepResign, nil
		}
		return stepFailed, x.reject(op, server, h)
	case StatusBadRequest, StatusUnknownSeq:
		return stepFailed, x.reject(op, server, h)
	case StatusExhausted:
		return stepFailed, x.exhausted(op, server)
	}
	// DecodeResponse admits no other status: a broken invariant, not bad input.
	panic(fmt.Sprintf("flurry: accepted an answer with status %d", h.Status))
}

// encode writes one attempt's request. Unsigned: padded to size. Signed: 3 bytes more than
// that (3x of them pays for the 8-byte answer MAC), at least SignedRequestSizeMin, ending with
// the trailer signed for the node id `server` last answered as (AnyServer until it has: PING
// and INFO are served, GET_IDS and GET_SEQ answered wrong_server naming it) and stamped with
// the wall clock now — the C++ client's Exchange::encode.
func (x *exchange) encode(op Opcode, count uint32, id uint64, size int, server int) []byte {
	if x.key == nil {
		if op == OpGetSeq {
			return encodeSeqRequest(0, count, id, x.seqName, size)
		}
		return encodeRequest(uint8(op), 0, count, id, size)
	}
	size += 3
	if size < SignedRequestSizeMin {
		size = SignedRequestSizeMin
	}
	if size > DatagramSizeMax {
		size = DatagramSizeMax
	}
	var request []byte
	request, x.requestMac = encodeSignedRequest(op, count, id, x.seqName, size, x.key, x.serverNode[server],
		uint64(time.Now().UnixMicro()))
	return request
}

// onRetry sleeps the server's hint (bounded) unless the budget would be exceeded.
func (x *exchange) onRetry(op Opcode, server int, detailUs uint32, retryWaited *time.Duration) (step, error) {
	x.counters.retries.Add(1)
	wait := time.Duration(detailUs) * time.Microsecond
	if wait < RetryWaitMin {
		wait = RetryWaitMin
	}
	if wait > x.opts.RetryWaitMax {
		wait = x.opts.RetryWaitMax
	}
	if *retryWaited+wait > x.opts.RetryBudget {
		return stepFailed, newError(CodeRetryExhausted, fmt.Sprintf(
			"%s kept answering RETRY for %v (budget %v): its issue ceiling is not rising; "+
				"is its watermark store or etcd stalled?", x.name(server), *retryWaited, x.opts.RetryBudget))
	}
	if err := x.pause(wait, op, server, "while waiting out a RETRY"); err != nil {
		return stepFailed, err
	}
	*retryWaited += wait
	return stepSameServer, nil
}

// noteNode records the node a server answered as. A FENCED server still names the node id it
// lost, which may be another server's now: not recorded. A node id answered by one server is
// no longer another's (node ids move between processes after a fence). A signed client takes
// only verified answers (accept), so no one else can move a node id it signs for.
func (x *exchange) noteNode(server int, h ResponseHeader) {
	if h.Status == StatusFenced { // it serves as no node now, and is not heard as one
		x.serverNode[server] = nodeUnknown
		return
	}
	x.heard[server] = true
	node := uint32(h.Node)
	for i, known := range x.serverNode {
		if known == node {
			x.serverNode[i] = nodeUnknown
		}
	}
	x.serverNode[server] = node
}

// onNotOwner asks the owner NOT_OWNER names if a server has answered as that node, else the
// next server (an unheard server may be the named one). No owner known, or the answering
// server naming its own node (its old owner key lives until its old lease ends), is a move
// under way: wait for it as for RETRY, within the same budget, and ask the next server.
func (x *exchange) onNotOwner(op Opcode, server int, h ResponseHeader, retryWaited *time.Duration) (step, error) {
	owner := h.Detail
	x.failures = append(x.failures, failure{kind: "notOwner", server: server, owner: owner})
	if owner == NotOwnerUnknown || owner == uint32(h.Node) {
		if *retryWaited+ownerMoveWait > x.opts.RetryBudget {
			return stepNextServer, nil
		}
		if err := x.pause(ownerMoveWait, op, server, "while waiting for the sequence's owner"); err != nil {
			return stepFailed, err
		}
		*retryWaited += ownerMoveWait
		return stepOtherServer, nil
	}
	for i, node := range x.serverNode {
		if node == owner && i != server {
			x.ownerServer = i
			return stepOwnerServer, nil
		}
	}
	// Given up only on what this exchange heard: an earlier one's record may be stale.
	for _, heard := range x.heard {
		if !heard {
			return stepNextServer, nil
		}
	}
	return stepFailed, newError(CodeNotOwner, fmt.Sprintf("%s does not serve the monotonic sequence '%s': node %d does, "+
		"and none of this client's servers answers as that node (add it to the server list)", x.name(server), x.seqName, owner))
}

// reject is BAD_REQUEST, UNAUTHORIZED or UNKNOWN_SEQUENCE: the error names the server and the
// reason; another server would answer the same.
func (x *exchange) reject(op Opcode, server int, h ResponseHeader) error {
	if h.Status == StatusUnknownSeq {
		return newError(CodeUnknownSequence, fmt.Sprintf("%s has no sequence '%s' (flurryctl seq create %s)",
			x.name(server), x.seqName, x.seqName))
	}
	text := fmt.Sprintf("%s answered %v (%s) to %v", x.name(server), h.Status, RequestErrorName(h.Detail), op)
	switch {
	case h.Status == StatusBadRequest:
		return newError(CodeBadRequest, text+": the server rejects this request; is the client built for another wire version?")
	case x.key == nil:
		return newError(CodeUnauthorized, text+": this server requires authentication; give the client a key (Options.Key, ReadKeyFile)")
	case h.Detail == errStaleTimestamp:
		return newError(CodeUnauthorized, text+": this client's clock is further from the server's than its window "+
			"allows, or the server started (or took its node id) after the request was signed: check both clocks (NTP)")
	case h.Detail == errWrongServer:
		return newError(CodeUnauthorized, text+": the server kept naming another node id than the one the request was signed for")
	}
	return newError(CodeUnauthorized, text+": the key is not allowed this request (see flurryctl keys list)")
}

// exhausted is the error of an EXHAUSTED answer: nothing can be issued again, anywhere.
func (x *exchange) exhausted(op Opcode, server int) error {
	why := ": the ID layout's time field has run out (its last instant has passed): no server of this layout " +
		"can issue IDs again; a new layout or epoch is needed"
	if op == OpGetSeq {
		why = fmt.Sprintf(": the sequence '%s' has reached 2^63 and can issue no number again", x.seqName)
	}
	return newError(CodeExhausted, fmt.Sprintf("%s answered EXHAUSTED to %v%s", x.name(server), op, why))
}

// armDeadline sets the read deadline of `server`'s socket for a wait, unless the call's context
// has ended (waitCanceled) or the socket is closed (waitClosed); waitAnswer when armed. Under
// watchMu: a watcher that fires after this wakes the read; one that fired before is seen here.
func (x *exchange) armDeadline(server int, deadline time.Time) waitResult {
	x.watchMu.Lock()
	defer x.watchMu.Unlock()
	if x.canceled.Load() {
		return waitCanceled
	}
	if err := x.conns[server].SetReadDeadline(deadline); err != nil {
		return waitClosed
	}
	return waitAnswer
}

// await waits until the answer to request `id` arrives from `server`, the deadline passes, the
// call's context ends or the client is closed. Everything else that arrives is counted and
// dropped.
func (x *exchange) await(server int, op Opcode, count uint32, id uint64, deadline time.Time) (Response, waitResult) {
	if x.raws != nil && !x.refilling {
		if response, w, done := x.poll(server, op, count, id, deadline); done {
			return response, w
		}
	}
	conn := x.conns[server]
	for {
		if w := x.armDeadline(server, deadline); w != waitAnswer {
			return Response{}, w
		}
		x.blocked.Add(1)
		n, err := conn.Read(x.receive)
		switch {
		case err == nil:
			if response, ok := x.accept(x.receive[:n], op, count, id); ok {
				return response, waitAnswer
			}
		case errors.Is(err, net.ErrClosed):
			return Response{}, waitClosed
		case x.canceled.Load():
			return Response{}, waitCanceled
		case errors.Is(err, os.ErrDeadlineExceeded), !time.Now().Before(deadline):
			return Response{}, waitTimeout
		default: // a queued ICMP error (ECONNREFUSED: nothing listens there): pause so it cannot spin
			switch x.sleep(sendFailurePause, x.ctx.Done()) {
			case wakeClosed:
				return Response{}, waitClosed
			case wakeCanceled:
				return Response{}, waitCanceled
			}
		}
	}
}

// poll reads without blocking until Options.Poll has passed (or the deadline); done when it
// found the answer, the client closed or the call's context ended. A net.Conn read never
// returns at once, so this asks the socket itself (recvfrom with MSG_DONTWAIT, through the
// runtime's raw access).
func (x *exchange) poll(server int, op Opcode, count uint32, id uint64, deadline time.Time) (Response, waitResult, bool) {
	until := time.Now().Add(x.opts.Poll)
	if until.After(deadline) {
		until = deadline
	}
	// The raw read checks the read deadline first: the attempt's, not an earlier one that passed.
	if w := x.armDeadline(server, deadline); w != waitAnswer {
		return Response{}, w, true
	}
	raw := x.raws[server]
	for time.Now().Before(until) {
		if x.canceled.Load() {
			return Response{}, waitCanceled, true
		}
		var n int
		var readErr error
		err := raw.Read(func(fd uintptr) bool {
			n, _, readErr = syscall.Recvfrom(int(fd), x.receive, syscall.MSG_DONTWAIT)
			return true // never wait here: the loop looks again
		})
		switch {
		case errors.Is(err, net.ErrClosed):
			return Response{}, waitClosed, true
		case err != nil:
			return Response{}, waitTimeout, false // the deadline or another error: the blocking read decides
		case readErr == nil:
			if response, ok := x.accept(x.receive[:n], op, count, id); ok {
				return response, waitAnswer, true
			}
		}
	}
	return Response{}, waitTimeout, false
}

// accept applies every rule of PROTOCOL.md "Response decoding" in order, after the answer MAC
// when signed; true if the datagram is the answer to request `id`.
func (x *exchange) accept(datagram []byte, op Opcode, count uint32, id uint64) (Response, bool) {
	if x.key != nil {
		if !x.verified(datagram, id) {
			return Response{}, false
		}
		datagram = datagram[:len(datagram)-MacSize]
	}
	response := DecodeResponse(datagram) // rules 1..12
	if response.Err != RespOK {
		x.counters.malformed.Add(1)
		return response, false
	}
	if response.Header.RequestID != id { // rule 13: late answer to an earlier attempt, or foreign
		x.counters.ignored.Add(1)
		return response, false
	}
	if Opcode(response.Header.Opcode) != op || idsIn(response.Ranges) > uint64(count) { // rules 14, 15
		x.counters.malformed.Add(1)
		return response, false
	}
	return response, true
}

// verified is true when a signed answer's MAC verifies; else it counts the datagram and
// remembers an unsigned UNAUTHORIZED to request `id` for the error message only.
func (x *exchange) verified(datagram []byte, id uint64) bool {
	if verifyAnswer(datagram, x.requestMac, x.key) {
		return true
	}
	x.counters.unverified.Add(1)
	if r := DecodeResponse(datagram); r.Err == RespOK && r.Header.RequestID == id && r.Header.Status == StatusUnauthorized {
		x.unsignedRefusal = r.Header.Detail
	}
	return false
}

func idsIn(ranges []Range) uint64 {
	var ids uint64
	for _, r := range ranges {
		ids += uint64(r.Count)
	}
	return ids
}

// fetch returns GET_IDS ranges holding exactly n IDs, asking again after partial answers.
func (x *exchange) fetch(n uint64) ([]Range, error) { return x.fetchOp(OpGetIDs, n) }

// fetchSeq is fetch for numbers of the named sequence (GET_SEQ).
func (x *exchange) fetchSeq(name string, n uint64) ([]Range, error) {
	x.seqName = name
	return x.fetchOp(OpGetSeq, n)
}

func (x *exchange) fetchOp(op Opcode, n uint64) ([]Range, error) {
	var out []Range
	for remaining := n; remaining > 0; {
		count := uint32(remaining)
		if remaining > uint64(x.opts.IDsPerRequest) {
			count = x.opts.IDsPerRequest
		}
		// Padding that lets the answer carry enough ranges for `count` IDs.
		size := RequestSizeForIDs(uint64(count), uint64(x.opts.IDsPerRange))
		if err := x.run(op, count, size); err != nil {
			return nil, err // the IDs received so far are dropped: never handed out
		}
		ranges := x.answer.response.Ranges
		ids := idsIn(ranges) // accept() guarantees ids <= count <= remaining
		out = append(out, ranges...)
		x.counters.ids.Add(ids)
		remaining -= ids
	}
	return out, nil
}

// failAttempts is the error once the attempts ran out: every server that failed, in order of
// first failure, and how.
func (x *exchange) failAttempts() error {
	attempts := fmt.Sprintf("%d attempts", x.opts.Attempts)
	if x.opts.Attempts == 1 {
		attempts = "1 attempt"
	}
	allTimeouts, anyFenced, anyDraining, anyNotOwner := true, false, false, false
	var order []int
	for _, f := range x.failures {
		allTimeouts = allTimeouts && f.kind == "timeout"
		anyFenced = anyFenced || f.kind == "fenced"
		anyDraining = anyDraining || f.kind == "draining"
		anyNotOwner = anyNotOwner || f.kind == "notOwner"
		if !containsInt(order, f.server) {
			order = append(order, f.server)
		}
	}
	if x.unsignedRefusal != 0 { // the attempts ran out after an unverifiable refusal: name it
		return newError(CodeUnauthorized, fmt.Sprintf("no verifiable answer after %s; an unsigned UNAUTHORIZED (%s) "+
			"came back, which a signed client cannot trust: check the key id, secret and clock",
			attempts, RequestErrorName(x.unsignedRefusal)))
	}
	names := make([]string, len(order))
	for i, server := range order {
		names[i] = x.name(server)
		if !allTimeouts {
			names[i] = x.describeFailures(server)
		}
	}
	if allTimeouts {
		// A signed request naming a key the server lacks, or with a wrong secret, is dropped
		// unanswered (PROTOCOL.md: no oracle): from here that looks like silence.
		signed := ""
		if x.key != nil {
			signed = " (a server drops signed requests whose key id it does not know or whose MAC does not verify: " +
				"check the key id and secret, flurryctl keys list)"
		}
		return newError(CodeNoAnswer, fmt.Sprintf("no answer from %s after %s of %v%s",
			strings.Join(names, ", "), attempts, x.opts.Timeout, signed))
	}
	code := CodeNoAnswer
	switch {
	case anyNotOwner: // says most: the sequence is served, just not by the servers that answered
		code = CodeNotOwner
	case anyFenced:
		code = CodeFenced
	case anyDraining: // every FENCED answer was a drained server's
		code = CodeDraining
	}
	return newError(code, fmt.Sprintf("no server could serve the request after %s: %s",
		attempts, strings.Join(names, "; ")))
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func times(n int) string {
	if n == 1 {
		return " once"
	}
	return fmt.Sprintf(" %d times", n)
}

// describeFailures is e.g. "10.0.0.1:7420 answered FENCED once (it holds no node id: lost, or
// not yet claimed), gave no answer within 100ms 2 times".
func (x *exchange) describeFailures(server int) string {
	counts := map[string]int{}
	var sendErr error
	owner := uint32(NotOwnerUnknown)
	for _, f := range x.failures {
		if f.server == server {
			counts[f.kind]++
			if f.err != nil {
				sendErr = f.err
			}
			if f.kind == "notOwner" {
				owner = f.owner
			}
		}
	}
	var parts []string
	if n := counts["fenced"]; n > 0 {
		parts = append(parts, "answered FENCED"+times(n)+" (it holds no node id: lost, or not yet claimed)")
	}
	if n := counts["draining"]; n > 0 {
		parts = append(parts, "answered FENCED"+times(n)+" (draining: its operator is stopping it)")
	}
	if n := counts["notOwner"]; n > 0 {
		whose := fmt.Sprintf("node %d serves it", owner)
		if owner == NotOwnerUnknown {
			whose = "no owner known"
		}
		parts = append(parts, "answered NOT_OWNER"+times(n)+" ("+whose+")")
	}
	if n := counts["timeout"]; n > 0 {
		parts = append(parts, fmt.Sprintf("gave no answer within %v%s", x.opts.Timeout, times(n)))
	}
	if n := counts["send"]; n > 0 {
		parts = append(parts, fmt.Sprintf("could not be sent to (%v)%s", sendErr, times(n)))
	}
	return x.name(server) + " " + strings.Join(parts, ", ")
}
