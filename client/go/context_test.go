// context_test.go — the Context variants against fake servers: a cancel or a deadline ends a
// call wherever it waits (for an answer, polling or blocked; in a RETRY back-off; behind
// another call or a prefetch refill) with ErrCanceled wrapping ctx.Err(), and no ID of an
// answer that comes too late is ever handed out, then or later. What is asserted is what the
// call returns and which IDs it handed out; the only time bound is a generous one (5 s) for
// waits that would otherwise last 10 s or more.
package flurry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// returnLimit: a canceled call returns within this; the waits it interrupts last longer.
const returnLimit = 5 * time.Second

// callAsync runs call in a goroutine; the result comes on the channel.
func callAsync(call func() error) <-chan error {
	result := make(chan error, 1)
	go func() { result <- call() }()
	return result
}

// wantCanceled waits (returnLimit) for a call's error and checks it is ErrCanceled wrapping
// cause.
func wantCanceled(t *testing.T, result <-chan error, cause error, what string) {
	t.Helper()
	select {
	case err := <-result:
		if !errors.Is(err, ErrCanceled) || !errors.Is(err, cause) {
			t.Errorf("%s: error %v, want ErrCanceled wrapping %v", what, err, cause)
		}
	case <-time.After(returnLimit):
		t.Fatalf("%s: still waiting %v after the context ended", what, returnLimit)
	}
}

// calls are every Context variant, each asking for something that takes one exchange.
var contextCalls = map[string]func(ctx context.Context, c *Client) error{
	"GetContext":       func(ctx context.Context, c *Client) error { _, err := c.GetContext(ctx, 3); return err },
	"GetRangesContext": func(ctx context.Context, c *Client) error { _, err := c.GetRangesContext(ctx, 3); return err },
	"NextContext":      func(ctx context.Context, c *Client) error { _, err := c.NextContext(ctx); return err },
	"GetSeqContext":    func(ctx context.Context, c *Client) error { _, err := c.GetSeqContext(ctx, "ledger", 3); return err },
	"GetSeqRangesContext": func(ctx context.Context, c *Client) error {
		_, err := c.GetSeqRangesContext(ctx, "ledger", 3)
		return err
	},
	"PingContext": func(ctx context.Context, c *Client) error { _, err := c.PingContext(ctx); return err },
	"InfoContext": func(ctx context.Context, c *Client) error { _, err := c.InfoContext(ctx); return err },
}

// answerAny is an OK answer to any request: IDs from ids, PING, INFO (snowflake).
func answerAny(r request, ids *idSource) []byte {
	switch Opcode(r.opcode) {
	case OpPing:
		return statusAnswer(r, StatusOK, 0)
	case OpInfo:
		info := Info{EpochMs: DefaultEpochMs, TimeUnitMs: 1, TimeBits: 41, NodeBits: 10, SequenceBits: 12, Workers: 1}
		return encodeResponse(answerTo(r, StatusOK, 0), nil, &info)
	}
	return ids.answer(r)
}

// A server that does not answer a call's first request, an attempt timeout of a minute: every
// call is canceled while it waits for its answer, blocked in a read or polling, and returns at
// once. The next call, without a context, is answered: nothing of the canceled one remains.
func TestBehaviourContextCancelWhileWaitingForAnAnswer(t *testing.T) {
	counted(t)
	for _, poll := range []time.Duration{0, PollMax} {
		for name, call := range contextCalls {
			ids := newIDSource(1, 4096)
			server := startFake(t, func(r request, before []request) [][]byte {
				if len(before) == 0 {
					return nil
				}
				return [][]byte{answerAny(r, ids)}
			})
			opts := DefaultOptions()
			opts.Servers, opts.Timeout, opts.Attempts, opts.Poll = []string{server.addr}, TimeoutMax, 1, poll
			client := clientWith(t, opts, nil)
			ctx, cancel := context.WithCancel(context.Background())
			result := callAsync(func() error { return call(ctx, client) })
			server.awaitRequests(t, 1)
			cancel()
			wantCanceled(t, result, context.Canceled, name)
			if c := client.Counters(); c.Requests != 1 || c.Timeouts != 0 {
				t.Errorf("%s: counters %+v, want one request and no timeout", name, c)
			}
			if err := call(context.Background(), client); err != nil {
				t.Errorf("%s: the call after the canceled one: %v", name, err)
			}
		}
	}
}

// A deadline ends the call the same way, wrapping context.DeadlineExceeded, though the attempt
// would have waited a minute; a context already done sends nothing. A call sends its request
// unless its 50 ms passed before it began (a goroutine started late on a loaded machine), so
// the counts are bounded, not exact: at most one request a call, none waited out, and the
// calls whose context was done before they began add none.
func TestBehaviourContextDeadlineEndsTheCall(t *testing.T) {
	counted(t)
	quiet := startFake(t, silent)
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{quiet.addr}, TimeoutMax, 3
	client := clientWith(t, opts, nil)
	for name, call := range contextCalls {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		wantCanceled(t, callAsync(func() error { return call(ctx, client) }), context.DeadlineExceeded, name)
		cancel()
	}
	sent := client.Counters()
	if sent.Requests > uint64(len(contextCalls)) || sent.Timeouts != 0 {
		t.Errorf("counters %+v: at most one request per call, none waited out", sent)
	}
	quiet.awaitRequests(t, int(sent.Requests))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range contextCalls {
		wantCanceled(t, callAsync(func() error { return call(done, client) }), context.Canceled, name+" (done before)")
	}
	if c := client.Counters(); c.Requests != sent.Requests {
		t.Errorf("%d requests: a call whose context was done before it began sent one", c.Requests-sent.Requests)
	}
	if n := len(quiet.received()); n != int(sent.Requests) {
		t.Errorf("the server heard %d requests, the client counted %d", n, sent.Requests)
	}
}

// Canceled during a RETRY back-off of 10 s (the server's hint, RetryWaitMax): the call returns
// at once and asks nothing more.
func TestBehaviourContextCancelDuringRetryBackOff(t *testing.T) {
	counted(t)
	server := startFake(t, func(r request, before []request) [][]byte {
		return [][]byte{statusAnswer(r, StatusRetry, uint32(RetryWaitMaxMax/time.Microsecond))}
	})
	opts := DefaultOptions()
	opts.Servers, opts.Timeout = []string{server.addr}, answerTimeout
	opts.RetryWaitMax, opts.RetryBudget = RetryWaitMaxMax, RetryBudgetMax
	client := clientWith(t, opts, nil)
	ctx, cancel := context.WithCancel(context.Background())
	result := callAsync(func() error { _, err := client.GetContext(ctx, 1); return err })
	for deadline := time.Now().Add(10 * time.Second); client.Counters().Retries == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if client.Counters().Retries == 0 {
		t.Fatal("the RETRY answer never came")
	}
	cancel()
	wantCanceled(t, result, context.Canceled, "GetContext in a RETRY back-off")
	if n := len(server.received()); n != 1 {
		t.Errorf("%d requests: the back-off was not cut short", n)
	}
}

// The answer to a canceled call comes afterwards: it is read by the next call and ignored
// (another request id), never handed out; every ID handed out is unique.
func TestBehaviourContextNoLateIDIsHandedOut(t *testing.T) {
	counted(t)
	var mu sync.Mutex
	next := uint64(1000)
	server := startFake(t, func(r request, before []request) [][]byte {
		if len(before) == 0 {
			return nil // answered late, by hand
		}
		mu.Lock()
		defer mu.Unlock()
		first := next
		next += uint64(r.count)
		return [][]byte{okRanges(r, Range{First: first, Count: r.count})}
	})
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{server.addr}, TimeoutMax, 1
	client := clientWith(t, opts, nil)
	ctx, cancel := context.WithCancel(context.Background())
	result := callAsync(func() error { _, err := client.GetContext(ctx, 5); return err })
	first := server.awaitRequests(t, 1)[0]
	cancel()
	wantCanceled(t, result, context.Canceled, "GetContext")
	late := Range{First: 1, Count: first.count} // IDs 1..5: never to be handed out
	server.send(t, okRanges(first, late), server.client(0))
	seen := map[uint64]bool{}
	for i := 0; i < 20; i++ {
		ids, err := client.Get(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id >= late.First && id < late.First+uint64(late.Count) {
				t.Fatalf("ID %d of the canceled call's late answer was handed out", id)
			}
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	if c := client.Counters(); c.IgnoredResponses > 1 || c.IDsReceived != 100 {
		t.Errorf("counters %+v: the late answer is ignored at most once, 100 IDs taken", c)
	}
}

// A call queued behind another (here: a prefetch refill that waits for its answer, or a Get
// of another goroutine) is canceled while it waits for the exchange; the call it waited for
// goes on, and the IDs it gets are handed out once each.
func TestBehaviourContextCancelWhileWaitingForAnotherCall(t *testing.T) {
	counted(t)
	var mu sync.Mutex
	release, released := make(chan struct{}), sync.Once{}
	unblock := func() { released.Do(func() { close(release) }) }
	next := uint64(1)
	server := startFake(t, func(r request, before []request) [][]byte {
		if len(before) == 0 {
			<-release // the first request (the refill's, or the first Get's) waits for the test
		}
		mu.Lock()
		defer mu.Unlock()
		first := next
		next += uint64(r.count)
		return [][]byte{okRanges(r, Range{First: first, Count: r.count})}
	})
	t.Cleanup(unblock) // runs before the server's own cleanup, which waits for its handler
	opts := DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{server.addr}, TimeoutMax, 1
	opts.Prefetch, opts.IDsPerRequest = 64, 64
	prefetching := clientWith(t, opts, nil)
	server.awaitRequests(t, 1) // the refill's request, held
	ctx, cancel := context.WithCancel(context.Background())
	result := callAsync(func() error { _, err := prefetching.NextContext(ctx); return err })
	cancel()
	wantCanceled(t, result, context.Canceled, "NextContext behind a refill")
	unblock()
	seen := map[uint64]bool{}
	for i := 0; i < 200; i++ {
		id, err := prefetching.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
	}

	quiet := startFake(t, silent)
	opts = DefaultOptions()
	opts.Servers, opts.Timeout, opts.Attempts = []string{quiet.addr}, TimeoutMax, 1
	client := clientWith(t, opts, nil)
	blocking := callAsync(func() error { _, err := client.Get(1); return err })
	quiet.awaitRequests(t, 1)
	ctx, cancel = context.WithCancel(context.Background())
	result = callAsync(func() error { _, err := client.PingContext(ctx); return err })
	cancel()
	wantCanceled(t, result, context.Canceled, "PingContext behind a Get")
	if n := len(quiet.received()); n != 1 {
		t.Errorf("%d requests: the canceled Ping was sent", n)
	}
	client.Close()
	select {
	case err := <-blocking:
		wantCode(t, err, ErrClosed)
	case <-time.After(returnLimit):
		t.Fatal("Close did not end the Get")
	}
}
