// client/node/lib/exchange.js — one request/answer with failover, RETRY back-off and answer
// validation: the behaviour of the C++ client's Exchange (client/exchange.cc), over a Transport.
//
// Contract:
//   * Every datagram sent carries a fresh, unpredictable request id (crypto.randomFillSync,
//     buffered a block at a time; no counter) and goes out on the socket connected to its
//     server, so an answer is read only from the server asked. An answer is accepted only if
//     (signed) its MAC verifies, it passes decodeResponse, echoes the outstanding request id and
//     is consistent with the request (same opcode, never more IDs than asked); anything else is
//     counted (unverifiedResponses, malformedResponses, ignoredResponses) and dropped, so a late
//     answer to an earlier attempt is never taken for the current one.
//   * RETRY sleeps the server's hint, clamped to 50 µs..retryWaitMaxMs, and asks the same
//     server again without using an attempt, until retryBudgetMs of sleeping would be exceeded
//     (retry_exhausted). A timeout, a failed send and FENCED use an attempt and move to the next
//     server. BAD_REQUEST and UNAUTHORIZED end the exchange, but for a signed UNAUTHORIZED
//     wrong_server: the verified answer names the server's node id, the request is signed again
//     for it and sent to the same server at once, without using an attempt (twice at most in a
//     row). EXHAUSTED ends the exchange at once, asking no other server.
//   * NOT_OWNER (GET_SEQ of a monotonic sequence another node serves) uses an attempt and asks
//     the server last heard answering as the named node (every accepted answer's header names
//     its node; FENCED answers do not count), else the next server; when every server answered
//     during this exchange and none is the owner the exchange fails not_owner. With no owner
//     known (or a server naming itself: a move under way) it waits 50 ms, within the retry
//     budget, and asks the next server without using an attempt. UNKNOWN_SEQUENCE ends it.
//   * When the attempts run out the error names every server and what it did; all timeouts
//     are no_answer (signed: adding that a server drops requests with an unknown key id or a bad
//     MAC), a FENCED seen is fenced, or draining when every FENCED seen was draining.
//   * One exchange at a time: callers hold `lock` around run()/fetch(). close() ends a wait in
//     flight at once (FlurryError closed), and every later call.

import { randomFillSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';

import { FlurryError } from './errors.js';
import {
  ANY_SERVER,
  ANSWER_MAC_SIZE,
  DATAGRAM_SIZE_MAX,
  FENCED_DRAINING,
  NOT_OWNER_UNKNOWN,
  Opcode,
  REQUEST_HEADER_SIZE,
  SIGNED_REQUEST_SIZE_MIN,
  STALE_TIMESTAMP,
  Status,
  WRONG_SERVER,
  decodeResponse,
  encodeRequest,
  encodeSignedRequest,
  opcodeName,
  requestErrorName,
  requestSizeForIds,
  statusName,
  verifyAnswer,
} from './wire.js';

export const RETRY_WAIT_MIN_US = 50; // a RETRY hint of 0 must not become a busy loop
export const SEND_FAILURE_PAUSE_MS = 1; // after a send that fails at once
export const OWNER_MOVE_WAIT_MS = 50; // NOT_OWNER with no owner known
const NODE_UNKNOWN = 0xffffffff;
const RESIGNS_MAX = 2;

export function closedError() {
  return new FlurryError('closed', 'the client is closed');
}

/** A FIFO mutex: acquire() resolves to the release function. */
export class Lock {
  #held = false;
  #waiters = [];

  acquire() {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve(() => this.#release());
    }
    return new Promise((resolve) => this.#waiters.push(() => resolve(() => this.#release())));
  }

  #release() {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#held = false;
  }
}

// Unpredictable request ids: 8 bytes of the CSPRNG each, drawn a block at a time.
class RequestIds {
  #block = Buffer.alloc(512);
  #used = this.#block.length;

  next() {
    if (this.#used === this.#block.length) {
      randomFillSync(this.#block);
      this.#used = 0;
    }
    const id = this.#block.readBigUInt64BE(this.#used);
    this.#used += 8;
    return id;
  }
}

function times(n) {
  return n === 1 ? ' once' : ` ${n} times`;
}

export class Exchange {
  /**
   * @param {object} options the client's checked options (timeoutMs, attempts, idsPerRequest,
   *   idsPerRange, retryWaitMaxMs, retryBudgetMs, key)
   * @param {import('./transport.js').Transport} transport
   * @param {object} counters the client's counters, bumped in place
   */
  constructor(options, transport, counters) {
    this.options = options;
    this.transport = transport;
    this.counters = counters;
    this.lock = new Lock();
    this.current = 0; // the server asked first; moves on timeout, failed send, FENCED, NOT_OWNER
    this.ownerServer = 0;
    this.serverNode = new Array(transport.serverCount).fill(NODE_UNKNOWN); // node each last answered as
    this.heard = [];
    this.resigned = 0; // wrong_server answers in a row
    this.requestIds = new RequestIds();
    this.pending = null; // the attempt waiting for its answer
    this.sleeps = new Set(); // waits close() ends
    this.failures = [];
    this.unsignedRefusal = 0;
    this.closed = false;
  }

  close() {
    this.closed = true;
    if (this.pending !== null) this.pending.finish({ kind: 'closed' });
    for (const end of [...this.sleeps]) end();
  }

  // ---- receiving ----

  /** Every datagram of every socket comes here (Transport's onDatagram). */
  onDatagram(server, datagram) {
    const pending = this.pending !== null && this.pending.server === server ? this.pending : null;
    let data = datagram;
    if (this.options.key) {
      if (pending === null || !verifyAnswer(datagram, pending.requestMac, this.options.key.secret)) {
        this.counters.unverifiedResponses += 1;
        // Remembered for the error message only: anyone on the path could have sent it.
        if (pending !== null) {
          const view = decodeResponse(datagram);
          if (view.error === 'ok' && view.header.requestId === pending.requestId && view.header.status === Status.UNAUTHORIZED) {
            this.unsignedRefusal = view.header.detail;
          }
        }
        return;
      }
      data = datagram.subarray(0, datagram.length - ANSWER_MAC_SIZE);
    }
    const view = decodeResponse(data);
    if (view.error !== 'ok') {
      this.counters.malformedResponses += 1;
      return;
    }
    if (pending === null || view.header.requestId !== pending.requestId) {
      this.counters.ignoredResponses += 1; // a late answer to an earlier attempt, or foreign
      return;
    }
    if (!consistent(view, pending.request)) {
      this.counters.malformedResponses += 1;
      return;
    }
    pending.finish({ kind: 'answer', view, receivedMs: performance.now() });
  }

  // ---- waiting ----

  // Resolves true after `ms`, or false at once if the client is (or gets) closed.
  #sleep(ms, { unref = false } = {}) {
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const end = (done) => {
        clearTimeout(timer);
        this.sleeps.delete(end);
        resolve(done === true);
      };
      const timer = setTimeout(() => end(true), ms);
      if (unref) timer.unref();
      this.sleeps.add(end);
    });
  }

  /** A wait close() can interrupt; resolves false when it did. For the prefetch back-off. */
  sleep(ms, options) {
    return this.#sleep(ms, options);
  }

  // Waits for the answer to `request` from `server`: {kind: 'answer' | 'timeout' | 'closed'}.
  #await(server, request, requestMac) {
    return new Promise((resolve) => {
      const pending = {
        server,
        request,
        requestId: request.requestId,
        requestMac,
        finish: (result) => {
          clearTimeout(pending.timer);
          if (this.pending === pending) this.pending = null;
          resolve(result);
        },
      };
      pending.timer = setTimeout(() => pending.finish({ kind: 'timeout' }), this.options.timeoutMs);
      this.pending = pending;
    });
  }

  // ---- one exchange ----

  /**
   * One exchange; resolves to the accepted OK answer {view, server, rttMs}. Rejects with
   * FlurryError: no_answer, fenced, draining, retry_exhausted, bad_request, unauthorized,
   * exhausted, unknown_sequence, not_owner, closed. Caller holds `lock`.
   */
  async run(opcode, count, paddedSize, name) {
    if (this.closed) throw closedError();
    await this.transport.open();
    this.failures = [];
    this.unsignedRefusal = 0;
    this.heard = new Array(this.serverNode.length).fill(false);
    const state = { retryWaitedUs: 0, name };
    let attempt = 0;
    while (attempt < this.options.attempts) {
      const step = await this.#attempt(opcode, count, paddedSize, state);
      switch (step.kind) {
        case 'answered':
          return step.answer;
        case 'same_server': // after RETRY, or signed again after wrong_server: no attempt used
          continue;
        case 'other_server': // after a wait for a sequence's owner: no attempt used
          this.current = (this.current + 1) % this.serverNode.length;
          continue;
        case 'next_server':
          this.current = (this.current + 1) % this.serverNode.length;
          attempt += 1;
          continue;
        case 'owner_server':
          this.current = this.ownerServer;
          attempt += 1;
          continue;
        default:
          throw new Error(`unknown step ${step.kind}`);
      }
    }
    throw this.#attemptsFailed();
  }

  async #attempt(opcode, count, paddedSize, state) {
    const server = this.current;
    const request = { opcode, count, requestId: this.requestIds.next(), name: state.name };
    const datagram = this.#encode(request, server, paddedSize);
    const requestMac = this.options.key ? Buffer.from(datagram.subarray(datagram.length - ANSWER_MAC_SIZE)) : null;
    const sentMs = performance.now();
    this.counters.requests += 1;
    // Waiting before sending: an answer may come back before the send's callback runs.
    const waiting = this.#await(server, request, requestMac);
    const sendError = await this.transport.send(server, datagram);
    if (sendError !== null && this.pending !== null && this.pending.request === request) {
      this.pending.finish({ kind: 'send_failed' });
    }
    const result = await waiting;
    if (result.kind === 'closed' || this.closed) throw closedError();
    if (result.kind === 'send_failed') {
      this.counters.sendErrors += 1;
      this.failures.push({ kind: 'send_failed', server, error: sendError });
      if (!(await this.#sleep(SEND_FAILURE_PAUSE_MS))) throw closedError();
      return { kind: 'next_server' };
    }
    if (result.kind === 'timeout') {
      this.counters.timeouts += 1;
      this.failures.push({ kind: 'timeout', server });
      return { kind: 'next_server' };
    }
    this.counters.responses += 1;
    const header = result.view.header;
    this.#noteNode(server, header);
    const wrongServer = header.status === Status.UNAUTHORIZED && header.detail === WRONG_SERVER;
    if (!wrongServer) this.resigned = 0;
    switch (header.status) {
      case Status.OK:
        return { kind: 'answered', answer: { view: result.view, server, rttMs: result.receivedMs - sentMs } };
      case Status.RETRY:
        return this.#onRetry(server, header, state);
      case Status.FENCED:
        this.counters.fenced += 1;
        this.failures.push({ kind: header.detail === FENCED_DRAINING ? 'draining' : 'fenced', server });
        return { kind: 'next_server' };
      case Status.UNAUTHORIZED:
        // Signed for a node id this server does not serve (the first request to it, or the node
        // moved): the verified answer named its node (#noteNode), so sign again for it, once or
        // twice; a server that keeps naming another node is refused as any UNAUTHORIZED.
        if (wrongServer && this.options.key && this.resigned < RESIGNS_MAX) {
          this.resigned += 1;
          return { kind: 'same_server' };
        }
        throw this.#reject(opcode, server, header);
      case Status.BAD_REQUEST:
        throw this.#reject(opcode, server, header);
      case Status.EXHAUSTED:
        throw new FlurryError(
          'exhausted',
          `${this.transport.name(server)} answered EXHAUSTED to ${opcodeName(opcode)}` +
            (opcode === Opcode.GET_SEQ
              ? `: the sequence '${state.name}' has reached 2^63 and can issue no number again`
              : ': the ID layout\'s time field has run out (its last instant has passed): no server of this layout ' +
                'can issue IDs again; a new layout or epoch is needed'),
        );
      case Status.UNKNOWN_SEQUENCE:
        throw this.#rejectSeq(server, header, state.name);
      case Status.NOT_OWNER:
        return this.#onNotOwner(server, header, state);
      default:
        // decodeResponse admits no other status: a broken invariant, not bad input.
        throw new Error(`flurry client: accepted an answer with status ${header.status}`);
    }
  }

  // Unsigned: the padded request. Signed: 3 bytes more than that (3x of them pays for the 8-byte
  // answer MAC), at least 44, ending with the trailer: signed for the node id `server` last
  // answered as (ANY_SERVER until it has), stamped with the wall clock.
  #encode(request, server, paddedSize) {
    const key = this.options.key;
    if (!key) return encodeRequest(request, paddedSize);
    const size = Math.min(Math.max(paddedSize + 3, SIGNED_REQUEST_SIZE_MIN), DATAGRAM_SIZE_MAX);
    const node = this.serverNode[server] === NODE_UNKNOWN ? ANY_SERVER : this.serverNode[server];
    return encodeSignedRequest(request, size, key, node, BigInt(Date.now()) * 1000n);
  }

  // Records the node a server answered as. A FENCED server still names the node id it lost,
  // which may be another server's now: it serves as no node, and is not heard as one. A node id
  // answered by one server is no longer another's (node ids move between processes).
  #noteNode(server, header) {
    if (header.status === Status.FENCED) {
      this.serverNode[server] = NODE_UNKNOWN;
      return;
    }
    this.heard[server] = true;
    for (let i = 0; i < this.serverNode.length; ++i) if (this.serverNode[i] === header.node) this.serverNode[i] = NODE_UNKNOWN;
    this.serverNode[server] = header.node;
  }

  async #onRetry(server, header, state) {
    this.counters.retries += 1;
    const waitUs = Math.min(Math.max(header.detail, RETRY_WAIT_MIN_US), this.options.retryWaitMaxMs * 1000);
    if (state.retryWaitedUs + waitUs > this.options.retryBudgetMs * 1000) {
      throw new FlurryError(
        'retry_exhausted',
        `${this.transport.name(server)} kept answering RETRY for ${Math.floor(state.retryWaitedUs / 1000)} ms ` +
          `(budget ${this.options.retryBudgetMs} ms): its issue ceiling is not rising; is its watermark store or etcd stalled?`,
      );
    }
    if (!(await this.#sleep(waitUs / 1000))) throw closedError();
    state.retryWaitedUs += waitUs;
    return { kind: 'same_server' };
  }

  // NOT_OWNER: ask the owner it names if a server has answered as that node, else the next
  // server (an unheard server may be the named one). No owner known, or the answering server
  // naming its own node, is a move under way: wait for it within the retry budget.
  async #onNotOwner(server, header, state) {
    const owner = header.detail;
    this.failures.push({ kind: 'not_owner', server, owner });
    if (owner === NOT_OWNER_UNKNOWN || owner === header.node) {
      if (state.retryWaitedUs + OWNER_MOVE_WAIT_MS * 1000 > this.options.retryBudgetMs * 1000) return { kind: 'next_server' };
      if (!(await this.#sleep(OWNER_MOVE_WAIT_MS))) throw closedError();
      state.retryWaitedUs += OWNER_MOVE_WAIT_MS * 1000;
      return { kind: 'other_server' };
    }
    for (let i = 0; i < this.serverNode.length; ++i) {
      if (this.serverNode[i] === owner && i !== server) {
        this.ownerServer = i;
        return { kind: 'owner_server' };
      }
    }
    // Given up only on what this call heard: an earlier call's record of a server may be stale.
    if (this.heard.includes(false)) return { kind: 'next_server' };
    throw this.#rejectSeq(server, header, state.name); // the owner is none of this client's servers
  }

  // BAD_REQUEST or UNAUTHORIZED: another server would reject the same request, so none is tried.
  #reject(opcode, server, header) {
    const bad = header.status === Status.BAD_REQUEST;
    const reason = requestErrorName(header.detail);
    let why;
    if (bad) why = ': the server rejects this request; is the client built for another wire version?';
    else if (!this.options.key) why = ': this server requires authentication; give the client a key (options.key, readKeyFile)';
    else if (header.detail === STALE_TIMESTAMP) {
      why =
        ": this client's clock is further from the server's than its window allows, or the server started (or took " +
        'its node id) after the request was signed: check both clocks (NTP)';
    } else if (header.detail === WRONG_SERVER) why = ': the server kept naming another node id than the one the request was signed for';
    else why = ': the key is not allowed this request (see flurryctl keys list)';
    return new FlurryError(
      bad ? 'bad_request' : 'unauthorized',
      `${this.transport.name(server)} answered ${statusName(header.status)} (${reason}) to ${opcodeName(opcode)}${why}`,
      { reason, detail: header.detail },
    );
  }

  #rejectSeq(server, header, name) {
    if (header.status === Status.UNKNOWN_SEQUENCE) {
      return new FlurryError('unknown_sequence', `${this.transport.name(server)} has no sequence '${name}' (flurryctl seq create ${name})`);
    }
    return new FlurryError(
      'not_owner',
      `${this.transport.name(server)} does not serve the monotonic sequence '${name}': ` +
        (header.detail === NOT_OWNER_UNKNOWN
          ? 'no owner is known now'
          : `node ${header.detail} does, and none of this client's servers answers as that node (add it to the server list)`),
    );
  }

  // The attempts ran out: name every server that failed, in order of first failure.
  #attemptsFailed() {
    const attempts = this.options.attempts;
    const attemptsText = `${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`;
    const kinds = new Set(this.failures.map((failure) => failure.kind));
    const order = [...new Set(this.failures.map((failure) => failure.server))];
    if (this.unsignedRefusal !== 0) {
      return new FlurryError(
        'unauthorized',
        `no verifiable answer after ${attemptsText}; an unsigned UNAUTHORIZED (${requestErrorName(this.unsignedRefusal)}) came ` +
          'back, which a signed client cannot trust: check the key id, secret and clock',
        { reason: requestErrorName(this.unsignedRefusal), detail: this.unsignedRefusal },
      );
    }
    if (kinds.size === 1 && kinds.has('timeout')) {
      // A signed request naming a key the server lacks, or with a wrong secret, is dropped
      // unanswered (PROTOCOL.md: no oracle): from here that looks like silence.
      return new FlurryError(
        'no_answer',
        `no answer from ${order.map((server) => this.transport.name(server)).join(', ')} after ${attemptsText} of ` +
          `${this.options.timeoutMs} ms` +
          (this.options.key
            ? ' (a server drops signed requests whose key id it does not know or whose MAC does not verify: check the ' +
              'key id and secret, flurryctl keys list)'
            : ''),
      );
    }
    const text = `no server could serve the request after ${attemptsText}: ${order.map((server) => this.#describe(server)).join('; ')}`;
    // NOT_OWNER says most: the sequence is served, just not by the servers that answered.
    const code = kinds.has('not_owner') ? 'not_owner' : kinds.has('fenced') ? 'fenced' : kinds.has('draining') ? 'draining' : 'no_answer';
    return new FlurryError(code, text);
  }

  // e.g. "10.0.0.1:7420 answered FENCED once (it holds no node id: lost, or not yet claimed),
  // gave no answer within 100 ms 2 times".
  #describe(server) {
    const mine = this.failures.filter((failure) => failure.server === server);
    const count = (kind) => mine.filter((failure) => failure.kind === kind).length;
    const parts = [];
    if (count('fenced') > 0) parts.push(`answered FENCED${times(count('fenced'))} (it holds no node id: lost, or not yet claimed)`);
    if (count('draining') > 0) parts.push(`answered FENCED${times(count('draining'))} (draining: its operator is stopping it)`);
    if (count('not_owner') > 0) {
      const owner = mine.filter((failure) => failure.kind === 'not_owner').at(-1).owner;
      parts.push(
        `answered NOT_OWNER${times(count('not_owner'))} (${owner === NOT_OWNER_UNKNOWN ? 'no owner known' : `node ${owner} serves it`})`,
      );
    }
    if (count('timeout') > 0) parts.push(`gave no answer within ${this.options.timeoutMs} ms${times(count('timeout'))}`);
    if (count('send_failed') > 0) {
      const error = mine.filter((failure) => failure.kind === 'send_failed').at(-1).error;
      parts.push(`could not be sent to (${error.code ?? error.message})${times(count('send_failed'))}`);
    }
    return `${this.transport.name(server)} ${parts.join(', ')}`;
  }

  // ---- batches ----

  /**
   * Ranges holding exactly n IDs (GET_IDS, or GET_SEQ of `name`), asking again after partial
   * answers; on failure rejects and keeps nothing. Caller holds `lock`.
   */
  async fetch(n, name) {
    const opcode = name === undefined ? Opcode.GET_IDS : Opcode.GET_SEQ;
    const ranges = [];
    let remaining = n;
    while (remaining > 0) {
      const count = Math.min(remaining, this.options.idsPerRequest);
      // Padding that lets the answer carry enough ranges for `count` IDs.
      const paddedSize = Math.max(REQUEST_HEADER_SIZE, requestSizeForIds(count, this.options.idsPerRange));
      const answer = await this.run(opcode, count, paddedSize, name);
      let ids = 0;
      for (const range of answer.view.ranges) {
        ranges.push(range);
        ids += range.count;
      }
      this.counters.idsReceived += ids;
      remaining -= ids; // consistent() guarantees ids <= count <= remaining
    }
    return ranges;
  }
}

// The rules of "Response decoding" that need the request (13 is the request id, checked
// before): the same opcode, and never more IDs than asked.
function consistent(view, request) {
  if (view.header.opcode !== request.opcode) return false;
  let ids = 0;
  for (const range of view.ranges) ids += range.count;
  return ids <= request.count;
}
