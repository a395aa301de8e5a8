// client.go — the flurry UDP client for Go: the public API of package flurry.
//
// Contract (the same as the C++ client, client/client.h):
//   - A Client asks one server at a time, one request outstanding, over one UDP socket per
//     server connected to it (an answer is only ever read from the server asked). Every
//     datagram it sends carries a fresh, unpredictable request id (crypto/rand); an answer is
//     accepted only if it passes DecodeResponse (PROTOCOL.md "Response decoding" rules 1..12),
//     echoes the id of the request now outstanding (rule 13: else counted in IgnoredResponses)
//     and is consistent with that request (rules 14, 15: same opcode, never more IDs than
//     asked; else counted in MalformedResponses). Nothing from a rejected datagram is used, not
//     even a retry hint.
//   - Statuses: OK is used; RETRY waits the server's hint (clamped to RetryWaitMin ..
//     Options.RetryWaitMax, at most Options.RetryBudget in total per exchange) and asks the
//     same server again without using an attempt; FENCED and a timeout move to the next server
//     and use one of Options.Attempts; BAD_REQUEST and UNAUTHORIZED end the call (but for a
//     signed wrong_server: signed again for the node the server names, at once, twice at
//     most); EXHAUSTED ends the call (ErrExhausted). NOT_OWNER (GetSeq of a monotonic sequence
//     another node serves, in cluster mode) uses an attempt and asks the server that last
//     answered as the node it names (every answer's header names its node; a FENCED one's
//     does not count), else the next server; the call fails ErrNotOwner when every server of
//     the list answered during the call and none is the owner. With no owner known (or a
//     server naming itself) it waits 50 ms and asks the next server without using an
//     attempt, within Options.RetryBudget. UNKNOWN_SEQUENCE ends the call.
//   - With Options.Key every request (each attempt, PING, INFO, GET_IDS, GET_SEQ, the prefetch
//     refills) is signed (PROTOCOL.md "Authentication") for the node id the server last
//     answered as, and an answer is accepted only if its MAC verifies, before any rule above;
//     others are counted in UnverifiedResponses and ignored. A signed UNAUTHORIZED (the key
//     may not do this) ends the call; an unsigned one cannot be trusted and is named only if
//     the attempts run out.
//   - An answer may hold fewer IDs than asked (anti-amplification, the issue ceiling): the
//     client asks again for the rest. Get returns exactly n IDs or an error and no IDs.
//   - Every call that does I/O has a Context variant (GetContext, NextContext, ...): the
//     context's cancellation and deadline end the call wherever it waits — for the client's
//     other calls, for an answer, for a RETRY back-off — with ErrCanceled wrapping ctx.Err().
//     IDs of an answer that arrives after are never handed out. The variants without a
//     context use context.Background().
//   - Goroutine-safe: exchanges are serialized by a one-slot semaphore (Client.io), so
//     concurrent calls queue (and queue behind the prefetch goroutine's refill). With
//     Options.Prefetch, Next is the call for many goroutines: it usually takes an ID from a
//     local buffer.

package flurry

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultServer is flurryd's default --listen.
const DefaultServer = "127.0.0.1:7420"

// Bounds on Options, checked by New.
const (
	ServersMax      = 64
	TimeoutMin      = time.Millisecond
	TimeoutMax      = 60 * time.Second
	AttemptsMax     = 100
	PrefetchMin     = 2
	PrefetchMax     = 1 << 24
	RetryWaitMaxMax = 10 * time.Second
	RetryBudgetMax  = 600 * time.Second
	IDsPerRangeMax  = 1 << 31
	GetCountMax     = 1 << 26 // the most IDs one Get/GetRanges call returns
	// RetryWaitMin: a RETRY hint of 0 must not turn into a busy loop.
	RetryWaitMin = 50 * time.Microsecond
	PollMax      = 10 * time.Millisecond // the C++ client's poll_max
)

// Options configure a Client. Start from DefaultOptions; New checks every field.
type Options struct {
	// "HOST:PORT" each, HOST an IPv4 address or a name resolved once by New. Tried in order;
	// the client stays on a server until it times out or answers FENCED (or NOT_OWNER: then
	// on the owner). 1..ServersMax.
	Servers []string
	// How long one attempt waits for its answer. TimeoutMin..TimeoutMax. Default 100 ms.
	Timeout time.Duration
	// Attempts per exchange; each timeout or FENCED answer moves to the next server (wrapping
	// around), each NOT_OWNER to the owner or the next server. 1..AttemptsMax. Default 5.
	Attempts int
	// The most IDs asked in one request. 1..CountMax. Default 4096.
	IDsPerRequest uint32
	// The IDs one range is assumed to hold when padding a request (PROTOCOL.md "How a client
	// asks for N IDs": the layout's counter capacity, Layout.CounterCapacity of Info). Too
	// small only pads more; too large means more re-asks. 1..IDsPerRangeMax. Default 256, the
	// C++ client's conservative guess (12 sequence bits shared by 16 workers).
	IDsPerRange uint32
	// 0: off. Otherwise the size of a local ID buffer that a background goroutine refills when
	// it falls below half. 0 or PrefetchMin..PrefetchMax. IDs left at Close are never used.
	Prefetch int
	// The longest single wait after a RETRY answer, whatever its hint. 1 ms..RetryWaitMaxMax.
	// Default 100 ms.
	RetryWaitMax time.Duration
	// The most time one exchange spends waiting on RETRY answers before it fails with
	// ErrRetryExhausted, and on NOT_OWNER with no owner known (50 ms each) before it uses the
	// attempts. 0..RetryBudgetMax. Default 2 s.
	RetryBudget time.Duration
	// 0: off. Otherwise a call waiting for its answer reads the socket without blocking for
	// this long before it blocks: a woken goroutine's thread can cost more than the round trip
	// (15-25 us on a VM without guest halt-polling). The calling goroutine spins (a core while
	// it does); the prefetch refill goroutine never does. 0..PollMax, like the C++ client's
	// Options::poll.
	Poll time.Duration
	// nil: unsigned. Otherwise every request is signed with this key and only answers whose MAC
	// verifies are accepted (UnverifiedResponses counts the others). ReadKeyFile reads one
	// from a client key file. New keeps a copy.
	Key *Key
}

// DefaultOptions are the C++ client's defaults.
func DefaultOptions() Options {
	return Options{
		Servers:       []string{DefaultServer},
		Timeout:       100 * time.Millisecond,
		Attempts:      5,
		IDsPerRequest: 4096,
		IDsPerRange:   256,
		RetryWaitMax:  100 * time.Millisecond,
		RetryBudget:   2 * time.Second,
	}
}

// Counters are monotonic since New. Read them with Client.Counters.
type Counters struct {
	Requests           uint64 // datagrams sent (every attempt and re-ask)
	Responses          uint64 // answers accepted for the outstanding request
	Retries            uint64 // RETRY answers
	Timeouts           uint64 // attempts that got no accepted answer in time
	Fenced             uint64 // FENCED answers
	IgnoredResponses   uint64 // well-formed, but for another request id (late or foreign)
	MalformedResponses uint64 // failed DecodeResponse, or inconsistent with the request
	SendErrors         uint64 // send failures (counted as failed attempts)
	// Options.Key set: answers without a MAC (unsigned refusals included) or whose MAC does not
	// verify, ignored.
	UnverifiedResponses uint64
	IDsReceived         uint64 // IDs in accepted OK answers
	PrefetchRefills     uint64 // background refills that added IDs
	PrefetchFailures    uint64 // background refills that failed
}

// PingResult is one PING exchange.
type PingResult struct {
	RTT    time.Duration // send to receipt of the accepted answer
	Server string        // "HOST:PORT" as given in Options.Servers
	Node   uint16        // node id from the answer's header
}

// Client gets IDs from flurryd servers. Create with New, release with Close.
type Client struct {
	opts Options
	// One outstanding request: a one-slot semaphore (taking it can wait on a context) that
	// guards x and pushes into the prefetch buffer.
	io        chan struct{}
	x         *exchange
	conns     []*net.UDPConn // one per server, connected to it
	done      chan struct{}  // closed by Close
	closeOnce sync.Once
	prefetch  *prefetcher // nil when Options.Prefetch is 0
}

func checkOptions(o *Options) error {
	bad := func(format string, args ...any) error {
		return newError(CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case len(o.Servers) == 0:
		return bad("no server given; pass at least one HOST:PORT")
	case len(o.Servers) > ServersMax:
		return bad("%d servers given; at most %d are allowed", len(o.Servers), ServersMax)
	case o.Timeout < TimeoutMin || o.Timeout > TimeoutMax:
		return bad("timeout %v is out of range %v..%v", o.Timeout, TimeoutMin, TimeoutMax)
	case o.Attempts < 1 || o.Attempts > AttemptsMax:
		return bad("attempts %d is out of range 1..%d", o.Attempts, AttemptsMax)
	case o.IDsPerRequest < 1 || o.IDsPerRequest > CountMax:
		return bad("ids per request %d is out of range 1..%d", o.IDsPerRequest, CountMax)
	case o.IDsPerRange < 1 || o.IDsPerRange > IDsPerRangeMax:
		return bad("ids per range %d is out of range 1..%d", o.IDsPerRange, IDsPerRangeMax)
	case o.Prefetch != 0 && (o.Prefetch < PrefetchMin || o.Prefetch > PrefetchMax):
		return bad("prefetch %d is out of range: 0 (off) or %d..%d", o.Prefetch, PrefetchMin, PrefetchMax)
	case o.RetryWaitMax < time.Millisecond || o.RetryWaitMax > RetryWaitMaxMax:
		return bad("retry wait max %v is out of range 1ms..%v", o.RetryWaitMax, RetryWaitMaxMax)
	case o.RetryBudget < 0 || o.RetryBudget > RetryBudgetMax:
		return bad("retry budget %v is out of range 0..%v", o.RetryBudget, RetryBudgetMax)
	case o.Poll < 0 || o.Poll > PollMax:
		return bad("poll %v is out of range 0..%v", o.Poll, PollMax)
	}
	return nil
}

// resolve turns "HOST:PORT" into an IPv4 address, once.
func resolve(server string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil || host == "" {
		return nil, newError(CodeInvalidArgument, fmt.Sprintf("server %q is not HOST:PORT", server))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, newError(CodeInvalidArgument, fmt.Sprintf("server %q: port %q is not 1..65535", server, port))
	}
	addr, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		return nil, newError(CodeResolveFailed, fmt.Sprintf("server %q has no IPv4 address: %v", server, err))
	}
	return addr, nil
}

// New checks opts, resolves every server, opens one UDP socket per server, connected to it,
// and, with Prefetch on, starts the refill goroutine (which starts filling at once). Sends
// nothing otherwise, so it succeeds whether or not a server is up.
// Errors: ErrInvalidArgument (an option out of bounds, a server not HOST:PORT with a port
// 1..65535), ErrResolveFailed (no IPv4 address for a HOST), ErrSystem (a socket failed).
func New(opts Options) (*Client, error) {
	opts.Servers = append([]string(nil), opts.Servers...)
	opts.Key = copyKey(opts.Key)
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	addrs := make([]*net.UDPAddr, len(opts.Servers))
	for i, server := range opts.Servers {
		addr, err := resolve(server)
		if err != nil {
			return nil, err
		}
		addrs[i] = addr
	}
	c := &Client{opts: opts, io: make(chan struct{}, 1), done: make(chan struct{})}
	fail := func(err error) (*Client, error) {
		for _, conn := range c.conns {
			conn.Close()
		}
		return nil, err
	}
	var raws []syscall.RawConn
	for i, addr := range addrs {
		// Connected: the kernel delivers only this server's datagrams to it. Sends nothing.
		conn, err := net.DialUDP("udp4", nil, addr)
		if err != nil {
			return fail(newError(CodeSystem, fmt.Sprintf("cannot connect a UDP socket to server %q: %v", opts.Servers[i], err)))
		}
		c.conns = append(c.conns, conn)
		if opts.Poll > 0 {
			raw, err := conn.SyscallConn()
			if err != nil {
				return fail(newError(CodeSystem, fmt.Sprintf("cannot reach the UDP socket to poll it: %v", err)))
			}
			raws = append(raws, raw)
		}
	}
	c.x = newExchange(&c.opts, c.conns, c.sleep)
	c.x.raws = raws
	if opts.Prefetch != 0 {
		c.prefetch = startPrefetch(c)
	}
	return c, nil
}

// sleep waits d, or returns at once when the client is closed or cancel is closed.
func (c *Client) sleep(d time.Duration, cancel <-chan struct{}) wake {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return wakeTimer
	case <-c.done:
		return wakeClosed
	case <-cancel:
		return wakeCanceled
	}
}

// lock takes the exchange (Client.io), waiting for the calls before it, unless ctx ends or the
// client closes first.
func (c *Client) lock(ctx context.Context) error {
	select {
	case c.io <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.io <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &Error{Code: CodeCanceled, cause: ctx.Err(),
			Message: fmt.Sprintf("stopped while waiting for the client's other calls: %v", ctx.Err())}
	case <-c.done:
		return errClosed()
	}
}

func (c *Client) unlock() { <-c.io }

// withExchange runs f with the exchange taken and ctx watched.
func (c *Client) withExchange(ctx context.Context, f func(x *exchange) error) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	stop := c.x.watch(ctx)
	defer stop()
	return f(c.x)
}

// Close stops the prefetch goroutine (interrupting its exchange), closes the socket and makes
// every call in flight or to come fail with ErrClosed. Safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		for _, conn := range c.conns {
			conn.Close() // wakes a read in flight
		}
		if c.prefetch != nil {
			<-c.prefetch.stopped
		}
	})
	return nil
}

// GetRanges is GetRangesContext with context.Background().
func (c *Client) GetRanges(n int) ([]Range, error) {
	return c.GetRangesContext(context.Background(), n)
}

// GetRangesContext returns ranges whose counts sum to exactly n, in the order the servers
// issued them; each holds the IDs First .. First+Count-1. n == 0 returns nil at once.
// Errors: ErrInvalidArgument (n < 0 or n > GetCountMax), ErrNoAnswer, ErrFenced, ErrDraining,
// ErrRetryExhausted, ErrBadRequest, ErrUnauthorized (also when, signed, the attempts ran out
// after an unsigned UNAUTHORIZED), ErrExhausted, ErrClosed, ErrCanceled (ctx ended: wraps
// ctx.Err()).
func (c *Client) GetRangesContext(ctx context.Context, n int) ([]Range, error) {
	if n < 0 || n > GetCountMax {
		return nil, newError(CodeInvalidArgument, fmt.Sprintf("asked for %d IDs in one call; 0..%d are allowed", n, GetCountMax))
	}
	if n == 0 {
		return nil, nil
	}
	var out []Range
	err := c.withExchange(ctx, func(x *exchange) (err error) {
		out, err = x.fetch(uint64(n))
		return err
	})
	return out, err
}

// Get is GetContext with context.Background().
func (c *Client) Get(n int) ([]uint64, error) { return c.GetContext(context.Background(), n) }

// GetContext returns exactly n unique IDs, asking as many times as needed. On failure it
// returns no IDs (those already received are dropped, never reused). Errors: those of
// GetRangesContext.
func (c *Client) GetContext(ctx context.Context, n int) ([]uint64, error) {
	return expand(c.GetRangesContext(ctx, n))
}

// GetSeqRanges is GetSeqRangesContext with context.Background().
func (c *Client) GetSeqRanges(name string, n int) ([]Range, error) {
	return c.GetSeqRangesContext(context.Background(), name, n)
}

// GetSeqRangesContext returns ranges holding exactly n numbers of the named sequence (GET_SEQ;
// flurryctl seq create), asking as many times as needed. Numbers are unique for the sequence;
// in monotonic mode they increase. No prefetch. Errors: those of GetRangesContext,
// ErrInvalidArgument (a name not 1..SeqNameSizeMax characters of A-Z a-z 0-9 _ . - :),
// ErrUnknownSequence, ErrNotOwner (no server of the list serves this monotonic sequence),
// ErrExhausted (the sequence reached 2^63).
func (c *Client) GetSeqRangesContext(ctx context.Context, name string, n int) ([]Range, error) {
	if !validSeqName(name) {
		if len(name) > 64 {
			name = name[:64]
		}
		return nil, newError(CodeInvalidArgument, fmt.Sprintf("bad sequence name %q: 1 to %d characters from A-Z a-z 0-9 _ . - :", name, SeqNameSizeMax))
	}
	if n < 0 || n > GetCountMax {
		return nil, newError(CodeInvalidArgument, fmt.Sprintf("asked for %d numbers in one call; 0..%d are allowed", n, GetCountMax))
	}
	if n == 0 {
		return nil, nil
	}
	var out []Range
	err := c.withExchange(ctx, func(x *exchange) (err error) {
		out, err = x.fetchSeq(name, uint64(n))
		return err
	})
	return out, err
}

// GetSeq is GetSeqContext with context.Background().
func (c *Client) GetSeq(name string, n int) ([]uint64, error) {
	return c.GetSeqContext(context.Background(), name, n)
}

// GetSeqContext is GetSeqRangesContext, one number per element. Errors: those of
// GetSeqRangesContext.
func (c *Client) GetSeqContext(ctx context.Context, name string, n int) ([]uint64, error) {
	return expand(c.GetSeqRangesContext(ctx, name, n))
}

// expand lists every number of ranges, in order (none with err).
func expand(ranges []Range, err error) ([]uint64, error) {
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, idsIn(ranges))
	for _, r := range ranges {
		for i := uint64(0); i < uint64(r.Count); i++ {
			out = append(out, r.First+i)
		}
	}
	return out, nil
}

// Next is NextContext with context.Background().
func (c *Client) Next() (uint64, error) { return c.NextContext(context.Background()) }

// NextContext returns one ID. With Prefetch on it usually comes from the local buffer (the
// refill goroutine is woken when the buffer falls below half); when the buffer is empty it is
// fetched at once. Errors: those of GetRangesContext.
func (c *Client) NextContext(ctx context.Context) (uint64, error) {
	if c.prefetch != nil {
		return c.prefetch.next(ctx)
	}
	ranges, err := c.GetRangesContext(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ranges[0].First, nil
}

// Ping is PingContext with context.Background().
func (c *Client) Ping() (PingResult, error) { return c.PingContext(context.Background()) }

// PingContext measures one PING exchange, with the same attempts and failover as Get. A fenced
// server still answers PING. Errors: ErrNoAnswer, ErrBadRequest, ErrUnauthorized, ErrClosed,
// ErrCanceled.
func (c *Client) PingContext(ctx context.Context) (PingResult, error) {
	var result PingResult
	err := c.withExchange(ctx, func(x *exchange) error {
		if err := x.run(OpPing, 0, RequestHeaderSize); err != nil {
			return err
		}
		a := &x.answer
		result = PingResult{RTT: a.rtt, Server: c.opts.Servers[a.server], Node: a.response.Header.Node}
		return nil
	})
	return result, err
}

// Info is InfoContext with context.Background().
func (c *Client) Info() (Info, error) { return c.InfoContext(context.Background()) }

// InfoContext asks the server for its layout; Info.Layout() decodes its IDs (check it with
// Layout.Validate first). Errors: those of PingContext.
func (c *Client) InfoContext(ctx context.Context) (Info, error) {
	var info Info
	err := c.withExchange(ctx, func(x *exchange) error {
		if err := x.run(OpInfo, 0, RequestHeaderSize); err != nil {
			return err
		}
		info = x.answer.response.Info
		return nil
	})
	return info, err
}

// Counters is a snapshot of this client's counters.
func (c *Client) Counters() Counters {
	out := c.x.counters.snapshot()
	if c.prefetch != nil {
		out.PrefetchRefills = c.prefetch.refills.Load()
		out.PrefetchFailures = c.prefetch.failures.Load()
	}
	return out
}

// Options are the options this client was created with.
func (c *Client) Options() Options {
	o := c.opts
	o.Servers = append([]string(nil), o.Servers...)
	o.Key = copyKey(o.Key)
	return o
}

// copyKey: the caller's Key may change after New; the client's may not.
func copyKey(key *Key) *Key {
	if key == nil {
		return nil
	}
	k := *key
	return &k
}
