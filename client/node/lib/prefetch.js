// client/node/lib/prefetch.js — the local ID buffer that is refilled in the background
// (options.prefetch != 0), so that Client.next() usually returns without a network round trip.
// The C++ client's Prefetch (client/prefetch.h), on one event loop instead of a thread.
//
// Contract:
//   * The buffer holds up to `capacity` IDs as ranges, in the order the server issued them.
//     Taking one is synchronous, so two callers can never get the same ID; only holders of the
//     exchange's lock push into it, so the room computed under the lock only grows before the
//     push.
//   * next() on an empty buffer takes the lock (waiting out a refill in flight) and, if the
//     buffer is still empty, fetches at once: the first ID is the caller's, the rest go to the
//     buffer. A failed fetch rejects and leaves the buffer as it was: nothing claimed, nothing
//     skipped.
//   * A refill starts at construction and whenever the buffer falls below half; it asks one
//     request at a time, releasing the lock in between so get()/ping() callers are not starved,
//     and stops when the room left is less than one full request (or half the buffer). A failed
//     refill is counted (prefetchFailures), never thrown, and is followed by a back-off of
//     REFILL_BACKOFF_MS before the buffer asks again, so a dead server is not hammered.
//   * close() (the client's) ends a refill in flight; IDs left in the buffer are never used.

import { closedError } from './exchange.js';

export const REFILL_BACKOFF_MS = 250;

export class Prefetch {
  /**
   * @param {import('./exchange.js').Exchange} exchange
   * @param {number} capacity IDs the buffer holds
   * @param {string} [sequence] a GET_SEQ name; undefined: Snowflake IDs (GET_IDS)
   */
  constructor(exchange, capacity, sequence) {
    this.exchange = exchange;
    this.capacity = capacity;
    this.sequence = sequence;
    this.ranges = []; // {first: bigint, count: number}; ranges[head] is being taken from
    this.head = 0;
    this.offset = 0; // IDs of ranges[head] already taken
    this.size = 0; // IDs buffered
    this.refilling = false;
    this.refills = 0;
    this.failures = 0;
    this.#maybeRefill();
  }

  #take() {
    if (this.size === 0) return undefined;
    const range = this.ranges[this.head];
    const id = range.first + BigInt(this.offset);
    this.offset += 1;
    this.size -= 1;
    if (this.offset === range.count) {
      this.offset = 0;
      this.head += 1;
      if (this.head === this.ranges.length || this.head >= 1024) {
        this.ranges.splice(0, this.head);
        this.head = 0;
      }
    }
    return id;
  }

  // Appends the IDs of `ranges` after the first `skip`; an ID beyond the capacity (only if a
  // server answered more than asked) is dropped, never handed out. Caller holds the lock.
  #push(ranges, skip) {
    for (const range of ranges) {
      let first = range.first;
      let count = range.count;
      if (skip > 0) {
        const skipped = Math.min(skip, count);
        first += BigInt(skipped);
        count -= skipped;
        skip -= skipped;
      }
      count = Math.min(count, this.capacity - this.size);
      if (count <= 0) continue;
      this.ranges.push({ first, count });
      this.size += count;
    }
  }

  /** One ID from the buffer, or fetched at once when it is empty. */
  async next() {
    for (;;) {
      if (this.exchange.closed) throw closedError();
      const id = this.#take();
      if (id !== undefined) {
        this.#maybeRefill();
        return id;
      }
      // Empty: take the lock (waiting out a refill already in flight) and look again.
      const release = await this.exchange.lock.acquire();
      let first;
      try {
        if (this.size > 0) continue; // filled meanwhile (the finally releases the lock)
        if (this.exchange.closed) throw closedError();
        const ranges = await this.exchange.fetch(Math.min(this.capacity, this.exchange.options.idsPerRequest), this.sequence);
        first = ranges[0].first;
        this.#push(ranges, 1);
      } finally {
        release();
      }
      this.#maybeRefill();
      return first;
    }
  }

  #maybeRefill() {
    if (this.refilling || this.exchange.closed || this.size >= this.capacity / 2) return;
    this.refilling = true;
    this.#refill().then(
      () => {
        this.refilling = false;
      },
      () => {
        this.refilling = false; // #refill catches everything; this is only a safety net
      },
    );
  }

  // Tops the buffer up towards the capacity, one request at a time. Stops when the room left
  // is less than one full request (or half the buffer): topping up by a few IDs at a time
  // while consumers drain would turn one large request into many tiny ones.
  async #refill() {
    const options = this.exchange.options;
    const batchMin = Math.min(options.idsPerRequest, Math.floor(this.capacity / 2));
    let added = false;
    let failed = false;
    while (!this.exchange.closed) {
      const release = await this.exchange.lock.acquire();
      try {
        const room = this.capacity - this.size;
        if (room === 0 || room < batchMin || this.exchange.closed) break;
        const ranges = await this.exchange.fetch(Math.min(room, options.idsPerRequest), this.sequence);
        this.#push(ranges, 0);
        added = true;
      } catch {
        failed = !this.exchange.closed;
        break;
      } finally {
        release();
      }
    }
    if (added) this.refills += 1;
    if (failed) {
      this.failures += 1;
      // The back-off ends early only on close(); it does not keep the process alive.
      await this.exchange.sleep(REFILL_BACKOFF_MS, { unref: true });
    }
  }
}
