// client/java/.../Prefetch.java — internal: the local ID buffer a background thread refills
// (prefetch > 0), so that FlurryClient.next() usually returns without a network round trip
// (the C++ client/prefetch.cc).
//
// Contract:
//   * The buffer holds ranges (first, remaining), at most `prefetch` IDs in all. Only threads
//     holding the io lock push into it and everyone else only pops, so the room computed under
//     the io lock can only grow before the push.
//   * The refill thread never polls (Options.poll): no caller waits on its exchanges, so
//     spinning would only take a core from them.
//   * The refill thread starts filling at once, refills when the buffer falls below half,
//     asks one request at a time (releasing the io lock in between so get()/ping() callers
//     are not starved) and, after a failed refill, waits REFILL_BACKOFF before it may try
//     again, so a dead server is not hammered by an idle client.
//   * close() (FlurryClient.close) closes the transport, which interrupts the exchange in
//     flight, and joins the thread. IDs left in the buffer are never used.
package dev.flurry.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

final class Prefetch {
  static final long REFILL_BACKOFF_NANOS = 250_000_000;

  private final Options options;
  private final Exchange exchange;
  private final ReentrantLock ioLock;
  private final Transport transport;
  private final Thread thread;

  // The buffer: {next ID, IDs left} per range, guarded by itself.
  private final ArrayDeque<long[]> buffer = new ArrayDeque<>();
  private long buffered; // guarded by buffer
  private final Object refillSignal = new Object();
  private boolean refillWanted = true; // guarded by refillSignal
  private final AtomicBoolean refillRequested = new AtomicBoolean(true);
  private final AtomicLong refills = new AtomicLong();
  private final AtomicLong failures = new AtomicLong();

  Prefetch(Options options, Exchange exchange, ReentrantLock ioLock, Transport transport) {
    this.options = options;
    this.exchange = exchange;
    this.ioLock = ioLock;
    this.transport = transport;
    this.thread = new Thread(this::refillLoop, "flurry-prefetch");
    this.thread.setDaemon(true);
  }

  void start() throws FlurryException {
    try {
      thread.start();
    } catch (OutOfMemoryError | IllegalThreadStateException e) {
      throw new FlurryException(FlurryException.Code.SYSTEM,
          "cannot start the prefetch thread: " + e.getMessage());
    }
  }

  /** Wakes and joins the refill thread; the transport is already closed. */
  void stop() {
    synchronized (refillSignal) {
      refillSignal.notifyAll();
    }
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  long refills() {
    return refills.get();
  }

  long failures() {
    return failures.get();
  }

  /** One ID from the buffer, or synchronously (under the io lock) when it is empty. */
  long next() throws FlurryException {
    long id = tryPop();
    if (id < 0) {
      // Empty: take the socket (waiting out a refill already in flight), then look again.
      ioLock.lock();
      try {
        id = tryPop();
        if (id < 0) {
          final long want = Math.max(1, Math.min(options.prefetch() - size(),
              options.idsPerRequest()));
          List<Wire.Range> ranges = new ArrayList<>();
          exchange.fetch(want, ranges);
          id = ranges.get(0).first();
          push(ranges, 1);
        }
      } finally {
        ioLock.unlock();
      }
    }
    maybeWakeRefill();
    return id;
  }

  // An ID, or -1 when the buffer is empty (IDs are below 2^63, never negative).
  private long tryPop() {
    synchronized (buffer) {
      final long[] head = buffer.peekFirst();
      if (head == null) return -1;
      final long id = head[0]++;
      if (--head[1] == 0) buffer.pollFirst();
      --buffered;
      return id;
    }
  }

  private long size() {
    synchronized (buffer) {
      return buffered;
    }
  }

  // Adds every ID of `ranges` after skipping the first `skip`. Caller holds the io lock.
  private void push(List<Wire.Range> ranges, long skip) {
    synchronized (buffer) {
      for (Wire.Range range : ranges) {
        final long used = Math.min(skip, range.count());
        skip -= used;
        if (range.count() == used) continue;
        buffer.addLast(new long[] {range.first() + used, range.count() - used});
        buffered += range.count() - used;
      }
    }
  }

  private void maybeWakeRefill() {
    if (size() >= options.prefetch() / 2) return;
    if (refillRequested.get() || refillRequested.getAndSet(true)) return;
    synchronized (refillSignal) {
      refillWanted = true;
      refillSignal.notifyAll();
    }
  }

  // Tops the buffer up towards `prefetch`, one request at a time. Stops when the room left is
  // less than one full request (or half the buffer): topping up by a few IDs at a time while
  // consumers drain would turn one large request into many tiny ones. False on failure.
  private boolean refill() {
    final long batchMin = Math.min(options.idsPerRequest(), options.prefetch() / 2);
    final List<Wire.Range> ranges = new ArrayList<>();
    boolean added = false;
    while (!transport.isClosed()) {
      ioLock.lock();
      try {
        final long room = Math.max(0, options.prefetch() - size());
        if (room == 0 || room < batchMin) break;
        ranges.clear();
        exchange.pollAnswers(false);
        try {
          exchange.fetch(Math.min(room, options.idsPerRequest()), ranges);
        } finally {
          exchange.pollAnswers(true);
        }
        push(ranges, 0);
        added = true;
      } catch (FlurryException e) {
        if (!transport.isClosed()) failures.incrementAndGet();
        return false;
      } finally {
        ioLock.unlock();
      }
    }
    if (added) refills.incrementAndGet();
    return true;
  }

  private void refillLoop() {
    for (;;) {
      synchronized (refillSignal) {
        while (!refillWanted && !transport.isClosed()) {
          try {
            refillSignal.wait();
          } catch (InterruptedException e) {
            return;
          }
        }
        if (transport.isClosed()) return;
        refillWanted = false;
      }
      final boolean ok = refill();
      refillRequested.set(false);
      // The back-off ends early only when the client is closed.
      if (!ok) {
        try {
          transport.pause(REFILL_BACKOFF_NANOS);
        } catch (FlurryException e) {
          return;
        }
      }
    }
  }
}
