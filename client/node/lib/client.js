// client/node/lib/client.js — the flurry UDP client for Node.js: Client, its options and
// counters. The behaviour is the C++ client's (client/client.h); the parts live beside it:
// Transport (sockets), Exchange (one request/answer with failover), Prefetch (the buffer).
//
// Contract:
//   * new Client(options) checks every option (FlurryError invalid_argument) and sends
//     nothing, but with prefetch on, whose buffer starts filling at once; the sockets open on
//     the first call (resolve_failed, system if they cannot).
//   * One request is outstanding per client: calls queue behind each other (and behind the
//     prefetch refills) on the exchange's lock. With prefetch on, next() is the call meant for
//     many concurrent callers: it usually takes an ID from the buffer without a round trip.
//   * get(n) resolves to exactly n unique IDs, in the order the server issued them, or rejects
//     and keeps none (IDs already received are dropped, never reused). IDs are bigint;
//     the *String methods give the same IDs as decimal strings.
//   * close() ends every call in flight and every later one with FlurryError closed, and
//     resolves once the sockets are closed. IDs left in a prefetch buffer are never used.
//   * Every rejection is a FlurryError (errors.js) with a code and a message naming the
//     servers, attempts and the fix when known.

import { FlurryError, invalidArgument } from './errors.js';
import { Exchange, closedError } from './exchange.js';
import { Prefetch } from './prefetch.js';
import { normalizeKey } from './keys.js';
import { Transport, parseServer } from './transport.js';
import { COUNT_MAX, Opcode, REQUEST_HEADER_SIZE, validSeqName } from './wire.js';

export const DEFAULT_SERVER = '127.0.0.1:7420';

// Bounds on the options (CONTRIBUTING.md, bounds: every number has a minimum and a maximum), as the C++
// client's (client/client.h).
export const LIMITS = Object.freeze({
  serversMax: 64,
  timeoutMsMin: 1,
  timeoutMsMax: 60000,
  attemptsMax: 100,
  idsPerRangeMax: 2 ** 31,
  prefetchMin: 2,
  prefetchMax: 2 ** 24,
  retryWaitMaxMsMax: 10000,
  retryBudgetMsMax: 600000,
  getCountMax: 2 ** 26, // the most IDs one get() call takes; ask several times for more
  seqPrefetchNamesMax: 16, // named sequences nextSeq() keeps a buffer for
});

export const DEFAULT_OPTIONS = Object.freeze({
  servers: Object.freeze([DEFAULT_SERVER]),
  timeoutMs: 100,
  attempts: 5,
  idsPerRequest: 4096,
  idsPerRange: 256,
  prefetch: 0,
  retryWaitMaxMs: 100,
  retryBudgetMs: 2000,
  key: undefined,
});

const KNOWN_OPTIONS = new Set(Object.keys(DEFAULT_OPTIONS));

function checkWhole(name, value, min, max, unit = '') {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(`${name} ${String(value)}${unit} is out of range ${min}..${max}${unit}`);
  }
}

/** The options with their defaults, checked; throws FlurryError invalid_argument. */
export function checkOptions(given = {}) {
  if (given === null || typeof given !== 'object') throw invalidArgument('options must be an object');
  for (const name of Object.keys(given)) {
    if (!KNOWN_OPTIONS.has(name)) throw invalidArgument(`unknown option '${name}' (${[...KNOWN_OPTIONS].join(', ')})`);
  }
  const options = { ...DEFAULT_OPTIONS, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
  if (!Array.isArray(options.servers) || options.servers.length === 0) {
    throw invalidArgument('no server given; pass at least one HOST:PORT');
  }
  if (options.servers.length > LIMITS.serversMax) {
    throw invalidArgument(`${options.servers.length} servers given; at most ${LIMITS.serversMax} are allowed`);
  }
  options.servers.forEach(parseServer);
  checkWhole('timeoutMs', options.timeoutMs, LIMITS.timeoutMsMin, LIMITS.timeoutMsMax, ' ms');
  checkWhole('attempts', options.attempts, 1, LIMITS.attemptsMax);
  checkWhole('idsPerRequest', options.idsPerRequest, 1, COUNT_MAX);
  checkWhole('idsPerRange', options.idsPerRange, 1, LIMITS.idsPerRangeMax);
  if (options.prefetch !== 0) {
    if (!Number.isInteger(options.prefetch) || options.prefetch < LIMITS.prefetchMin || options.prefetch > LIMITS.prefetchMax) {
      throw invalidArgument(`prefetch ${String(options.prefetch)} is out of range: 0 (off) or ${LIMITS.prefetchMin}..${LIMITS.prefetchMax}`);
    }
  }
  checkWhole('retryWaitMaxMs', options.retryWaitMaxMs, 1, LIMITS.retryWaitMaxMsMax, ' ms');
  checkWhole('retryBudgetMs', options.retryBudgetMs, 0, LIMITS.retryBudgetMsMax, ' ms');
  options.servers = Object.freeze([...options.servers]);
  options.key = options.key === undefined ? undefined : normalizeKey(options.key);
  return Object.freeze(options);
}

function checkCount(n, what) {
  if (!Number.isInteger(n) || n < 0 || n > LIMITS.getCountMax) {
    throw invalidArgument(`asked for ${String(n)} ${what} in one call; 0 to ${LIMITS.getCountMax} are allowed`);
  }
}

function checkSeqName(name) {
  if (!validSeqName(name)) {
    throw invalidArgument(`bad sequence name '${String(name).slice(0, 64)}': 1 to 32 characters from A-Z a-z 0-9 _ . - :`);
  }
}

function expand(ranges, n) {
  const ids = new Array(n);
  let at = 0;
  for (const range of ranges) for (let i = 0; i < range.count; ++i) ids[at++] = range.first + BigInt(i);
  return ids;
}

function zeroCounters() {
  return {
    requests: 0, // datagrams sent (every attempt and re-ask)
    responses: 0, // answers accepted for the outstanding request
    retries: 0, // RETRY answers
    timeouts: 0, // attempts that got no accepted answer in time
    fenced: 0, // FENCED answers
    ignoredResponses: 0, // well-formed, but for another request id (late or foreign)
    malformedResponses: 0, // failed decoding, or inconsistent with the request
    sendErrors: 0, // sends that failed (counted as failed attempts)
    unverifiedResponses: 0, // signed: unsigned answers, or a MAC that does not verify
    idsReceived: 0, // IDs in accepted OK answers
    prefetchRefills: 0, // background refills that added IDs
    prefetchFailures: 0, // background refills that failed
  };
}

export class Client {
  #options;
  #counters = zeroCounters();
  #transport;
  #exchange;
  #prefetch = null;
  #seqPrefetch = new Map();
  #closing = null;

  /** See DEFAULT_OPTIONS and LIMITS; throws FlurryError invalid_argument. */
  constructor(options = {}) {
    this.#options = checkOptions(options);
    this.#transport = new Transport(this.#options.servers, (server, datagram) => this.#exchange.onDatagram(server, datagram));
    this.#exchange = new Exchange(this.#options, this.#transport, this.#counters);
    if (this.#options.prefetch !== 0) this.#prefetch = new Prefetch(this.#exchange, this.#options.prefetch);
  }

  /** The checked options, defaults filled in (the key's secret included: do not log it). */
  get options() {
    return this.#options;
  }

  get closed() {
    return this.#exchange.closed;
  }

  async #locked(work) {
    if (this.closed) throw closedError();
    const release = await this.#exchange.lock.acquire();
    try {
      if (this.closed) throw closedError();
      return await work();
    } finally {
      release();
    }
  }

  /** Ranges {first: bigint, count} holding exactly n IDs, in issue order. */
  async getRanges(n) {
    checkCount(n, 'IDs');
    if (n === 0) return [];
    return this.#locked(() => this.#exchange.fetch(n));
  }

  /** Exactly n unique IDs (bigint), in issue order. */
  async get(n) {
    const ranges = await this.getRanges(n);
    return expand(ranges, n);
  }

  /** get(n) as decimal strings. */
  async getStrings(n) {
    return (await this.get(n)).map(String);
  }

  /** One ID: from the prefetch buffer when on, else one request. */
  async next() {
    if (this.#prefetch !== null) return this.#prefetch.next();
    const ranges = await this.getRanges(1);
    return ranges[0].first;
  }

  async nextString() {
    return String(await this.next());
  }

  /** Ranges holding exactly n numbers of the named sequence (GET_SEQ). */
  async getSeqRanges(name, n) {
    checkSeqName(name);
    checkCount(n, 'numbers');
    if (n === 0) return [];
    return this.#locked(() => this.#exchange.fetch(n, name));
  }

  async getSeq(name, n) {
    const ranges = await this.getSeqRanges(name, n);
    return expand(ranges, n);
  }

  async getSeqStrings(name, n) {
    return (await this.getSeq(name, n)).map(String);
  }

  /**
   * One number of the named sequence. With prefetch on, from a buffer of this name (made on
   * first use, refilled like next()'s, for at most LIMITS.seqPrefetchNamesMax names).
   */
  async nextSeq(name) {
    checkSeqName(name);
    if (this.#options.prefetch !== 0) {
      let buffer = this.#seqPrefetch.get(name);
      if (buffer === undefined && this.#seqPrefetch.size < LIMITS.seqPrefetchNamesMax && !this.closed) {
        buffer = new Prefetch(this.#exchange, this.#options.prefetch, name);
        this.#seqPrefetch.set(name, buffer);
      }
      if (buffer !== undefined) return buffer.next();
    }
    const ranges = await this.getSeqRanges(name, 1);
    return ranges[0].first;
  }

  async nextSeqString(name) {
    return String(await this.nextSeq(name));
  }

  /**
   * One PING exchange, with the attempts and failover of get(): {rttMs, server, node}. A fenced
   * server still answers PING.
   */
  async ping() {
    const answer = await this.#locked(() => this.#exchange.run(Opcode.PING, 0, REQUEST_HEADER_SIZE));
    return { rttMs: answer.rttMs, server: this.#transport.name(answer.server), node: answer.view.header.node };
  }

  /** The server's layout (INFO): Layout.fromInfo(info) decodes its IDs. */
  async info() {
    const answer = await this.#locked(() => this.#exchange.run(Opcode.INFO, 0, REQUEST_HEADER_SIZE));
    return { ...answer.view.info, server: this.#transport.name(answer.server), node: answer.view.header.node };
  }

  /** A snapshot of this client's counters, monotonic since construction. */
  counters() {
    const snapshot = { ...this.#counters };
    for (const buffer of [this.#prefetch, ...this.#seqPrefetch.values()]) {
      if (buffer === null) continue;
      snapshot.prefetchRefills += buffer.refills;
      snapshot.prefetchFailures += buffer.failures;
    }
    return snapshot;
  }

  /** Ends every call in flight (FlurryError closed) and closes the sockets. Idempotent. */
  close() {
    if (this.#closing === null) {
      this.#exchange.close();
      this.#closing = this.#transport.close();
    }
    return this.#closing;
  }
}

export { FlurryError };
