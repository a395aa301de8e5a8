// flurry-go-bench — a small, bounded benchmark of the Go client against a local flurryd:
// requests/s and p50/p99 latency of Get(1) with one request in flight, and IDs/s taken through
// the prefetch buffer (one goroutine, then several). Every ID received is checked for
// duplicates. Each phase stops at -duration or -ids, whichever comes first.
//
//	go run ./cmd/flurry-go-bench -flurryd ../../build/control/flurryd   (starts its own, node 1)
//	go run ./cmd/flurry-go-bench -server 127.0.0.1:7420                 (an existing one)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	flurry "flurry.dev/client"
	"flurry.dev/client/internal/flurryd"
)

const (
	durationMax = 30 * time.Second
	idsMax      = 20_000_000
)

func main() {
	server := flag.String("server", "", "HOST:PORT of a running flurryd (default: start one with -flurryd)")
	binary := flag.String("flurryd", os.Getenv("FLURRYD"), "flurryd binary to start when -server is not given")
	duration := flag.Duration("duration", 3*time.Second, "the most time per phase (at most 30s)")
	ids := flag.Int("ids", 2_000_000, "the most IDs per phase (at most 20,000,000)")
	goroutines := flag.Int("goroutines", 4, "goroutines in the shared prefetch phase (1..64)")
	poll := flag.Duration("poll", 0, "Options.Poll of the 1-in-flight phase's client (0..10ms)")
	flag.Parse()
	if *duration <= 0 || *duration > durationMax || *ids < 1 || *ids > idsMax || *goroutines < 1 || *goroutines > 64 ||
		*poll < 0 || *poll > flurry.PollMax {
		fmt.Fprintln(os.Stderr, "flurry-go-bench: -duration 1ns..30s, -ids 1..20000000, -goroutines 1..64, -poll 0..10ms")
		os.Exit(2)
	}
	if err := run(*server, *binary, *duration, *ids, *goroutines, *poll); err != nil {
		fmt.Fprintln(os.Stderr, "flurry-go-bench:", err)
		os.Exit(1)
	}
}

func run(server, binary string, duration time.Duration, idLimit, goroutines int, poll time.Duration) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if server == "" {
		p, err := flurryd.StartReady(binary, 1, func(addr string) bool {
			c, err := newClient(addr, 0, 0)
			if err != nil {
				return false
			}
			defer c.Close()
			_, err = c.Ping()
			return err == nil
		}, 15*time.Second)
		if err != nil {
			return err
		}
		defer p.Stop() //nolint:errcheck // best effort at exit; Pdeathsig covers a crash
		server = p.Addr
		fmt.Printf("started flurryd pid %d on %s\n", p.PID(), server)
	}
	fmt.Printf("GOMAXPROCS %d, %d CPUs; phases of at most %v or %d IDs\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), duration, idLimit)
	var all []uint64
	got, err := latencyPhase(ctx, server, duration, idLimit, poll)
	if err != nil {
		return err
	}
	all = append(all, got...)
	for _, g := range []int{1, goroutines} {
		got, err := prefetchPhase(ctx, server, duration, idLimit, g)
		if err != nil {
			return err
		}
		all = append(all, got...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return fmt.Errorf("ID %d received twice", all[i])
		}
	}
	fmt.Printf("all %d IDs unique\n", len(all))
	return nil
}

func newClient(server string, prefetch int, poll time.Duration) (*flurry.Client, error) {
	opts := flurry.DefaultOptions()
	opts.Servers = []string{server}
	opts.Prefetch = prefetch
	opts.Poll = poll
	return flurry.New(opts)
}

// latencyPhase: Get(1), one request in flight, each call timed; the client polls `poll`.
func latencyPhase(ctx context.Context, server string, duration time.Duration, idLimit int, poll time.Duration) ([]uint64, error) {
	c, err := newClient(server, 0, poll)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i := 0; i < 1000; i++ { // warm up: the server's first ceiling, caches
		if _, err := c.Get(1); err != nil {
			return nil, err
		}
	}
	ids := make([]uint64, 0, 1<<16)
	latencies := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	for len(ids) < idLimit && time.Since(start) < duration && ctx.Err() == nil {
		before := time.Now()
		got, err := c.Get(1)
		if err != nil {
			return nil, err
		}
		latencies = append(latencies, time.Since(before))
		ids = append(ids, got...)
	}
	elapsed := time.Since(start)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	at := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	fmt.Printf("get(1), 1 in flight, poll %v: %d requests in %v = %.0f requests/s; latency p50 %v p99 %v max %v\n",
		poll, len(latencies), elapsed.Round(time.Millisecond), float64(len(latencies))/elapsed.Seconds(),
		at(0.50), at(0.99), latencies[len(latencies)-1])
	fmt.Printf("  counters %+v\n", c.Counters())
	return ids, nil
}

// prefetchPhase: Next() from `goroutines` goroutines through one prefetch buffer.
func prefetchPhase(ctx context.Context, server string, duration time.Duration, idLimit, goroutines int) ([]uint64, error) {
	c, err := newClient(server, 1<<16, 0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // let the first fill land
	per := idLimit / goroutines
	results := make([][]uint64, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ids := make([]uint64, 0, per)
			for len(ids) < per && ctx.Err() == nil {
				if len(ids)%4096 == 0 && time.Since(start) >= duration {
					break
				}
				id, err := c.Next()
				if err != nil {
					errs[g] = err
					return
				}
				ids = append(ids, id)
			}
			results[g] = ids
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []uint64
	for g := range results {
		if errs[g] != nil {
			return nil, errs[g]
		}
		all = append(all, results[g]...)
	}
	fmt.Printf("prefetch (buffer 65536, %d goroutine(s)): %d IDs in %v = %.0f IDs/s\n",
		goroutines, len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds())
	fmt.Printf("  counters %+v\n", c.Counters())
	return all, nil
}
