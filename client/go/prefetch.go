// prefetch.go — the local ID buffer a background goroutine refills (Options.Prefetch != 0), so
// that Client.Next usually returns without a network round trip (the C++ client's
// client/prefetch.cc).
//
// Contract:
//   - The buffer is a channel of Options.Prefetch IDs. Only goroutines holding Client.io push
//     into it and everyone else only takes, so the room computed under the lock can only grow
//     before the push: a push never blocks.
//   - next(ctx) takes from the buffer; when it is empty it waits for whichever comes first: an
//     ID pushed by a refill, the exchange (then it fetches itself, under ctx), the end of ctx,
//     Close. A fetch that fails or is canceled pushes nothing: no ID is handed out twice, and
//     none of a canceled fetch at all.
//   - The refill goroutine starts filling at once, refills when the buffer falls below half,
//     asks one request at a time (releasing Client.io in between so Get/Ping callers are not
//     starved) and, after a failed refill, sleeps refillBackoff before it may try again, so a
//     dead server is not hammered by an idle client.
//   - Close stops it (interrupting its exchange) and waits for it. IDs left are never used.

package flurry

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

const refillBackoff = 250 * time.Millisecond

type prefetcher struct {
	c         *Client
	buffer    chan uint64
	wake      chan struct{} // capacity 1: a refill is wanted
	requested atomic.Bool   // a wake-up is pending or a refill is running
	refills   atomic.Uint64
	failures  atomic.Uint64
	stopped   chan struct{} // closed when the refill goroutine has returned
}

func startPrefetch(c *Client) *prefetcher {
	p := &prefetcher{c: c, buffer: make(chan uint64, c.opts.Prefetch), wake: make(chan struct{}, 1),
		stopped: make(chan struct{})}
	p.requested.Store(true)
	p.wake <- struct{}{} // fill at once
	go p.loop()
	return p
}

func (p *prefetcher) next(ctx context.Context) (uint64, error) {
	if p.closed() { // IDs left in the buffer at Close are never used
		return 0, errClosed()
	}
	select {
	case id := <-p.buffer:
		p.maybeWake()
		return id, nil
	default:
	}
	// Empty: an ID from a refill in flight, or the exchange to fetch one.
	select {
	case id := <-p.buffer:
		p.maybeWake()
		return id, nil
	case p.c.io <- struct{}{}:
	case <-ctx.Done():
		return 0, &Error{Code: CodeCanceled, cause: ctx.Err(),
			Message: fmt.Sprintf("stopped while waiting for the prefetch buffer: %v", ctx.Err())}
	case <-p.c.done:
		return 0, errClosed()
	}
	defer p.c.unlock()
	var id uint64
	select {
	case id = <-p.buffer:
	default:
		want := uint64(cap(p.buffer) - len(p.buffer))
		if want > uint64(p.c.opts.IDsPerRequest) {
			want = uint64(p.c.opts.IDsPerRequest)
		}
		if want == 0 {
			want = 1
		}
		stop := p.c.x.watch(ctx)
		ranges, err := p.c.x.fetch(want)
		stop()
		if err != nil {
			return 0, err
		}
		id = ranges[0].First
		p.push(ranges, 1)
	}
	p.maybeWake()
	return id, nil
}

// push adds every ID of ranges after the first `skip`. The caller holds Client.io.
func (p *prefetcher) push(ranges []Range, skip uint64) {
	for _, r := range ranges {
		for i := uint64(0); i < uint64(r.Count); i++ {
			if skip > 0 {
				skip--
				continue
			}
			select {
			case p.buffer <- r.First + i:
			default:
				panic("flurry: prefetch buffer full under Client.io (broken invariant)")
			}
		}
	}
}

func (p *prefetcher) maybeWake() {
	if len(p.buffer) >= cap(p.buffer)/2 || p.requested.Load() || p.requested.Swap(true) {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *prefetcher) closed() bool {
	select {
	case <-p.c.done:
		return true
	default:
		return false
	}
}

// refill tops the buffer up, one request at a time. It stops when the room left is less than
// one full request (or half the buffer): topping up a few IDs at a time while consumers drain
// would turn one large request into many tiny ones. False on failure.
func (p *prefetcher) refill() bool {
	batchMin := int(p.c.opts.IDsPerRequest)
	if half := cap(p.buffer) / 2; half < batchMin {
		batchMin = half
	}
	added := false
	for !p.closed() {
		select {
		case p.c.io <- struct{}{}:
		case <-p.c.done:
			return true // the loop sees the client closed
		}
		room := cap(p.buffer) - len(p.buffer)
		if room == 0 || room < batchMin {
			p.c.unlock()
			break
		}
		want := uint64(room)
		if want > uint64(p.c.opts.IDsPerRequest) {
			want = uint64(p.c.opts.IDsPerRequest)
		}
		p.c.x.refilling = true // under Client.io, like every use of the exchange
		ranges, err := p.c.x.fetch(want)
		p.c.x.refilling = false
		if err == nil {
			p.push(ranges, 0)
		}
		p.c.unlock()
		if err != nil {
			if !p.closed() {
				p.failures.Add(1)
			}
			return false
		}
		added = true
	}
	if added {
		p.refills.Add(1)
	}
	return true
}

func (p *prefetcher) loop() {
	defer close(p.stopped)
	for {
		select {
		case <-p.c.done:
			return
		case <-p.wake:
		}
		ok := p.refill()
		p.requested.Store(false)
		if !ok && p.c.sleep(refillBackoff, nil) != wakeTimer {
			return
		}
	}
}
