// client/node/test/fake_server.js — a scripted flurry server on a loopback UDP port, for the
// behaviour tests: it parses every request (header, GET_SEQ name, signed trailer, and checks the
// MAC when it has the key), records it, and answers what the test's handler says.
//
// Contract: FakeServer.start({node, key, handler}) binds 127.0.0.1:0. For each datagram the
// handler(request, server) returns nothing (silence), a Buffer or an array of Buffers (sent as
// they are), or an answer spec {status, detail, ranges, node, sign} that answer() encodes and,
// for a signed request when the server has the key, signs (sign: false sends it unsigned).
// issue(request) hands out the next IDs of this server's counter, never one twice, split into
// ranges of `perRange` IDs and no more ranges than the request's size allows (the 3x rule).
// close() closes the socket; nothing else is left running.

import dgram from 'node:dgram';

import { wire } from '../index.js';

export class FakeServer {
  /**
   * @param {{node?: number, key?: {id: number, secret: Uint8Array}, handler?: Function,
   *   perRange?: number, firstId?: bigint}} [options]
   */
  static async start(options = {}) {
    const server = new FakeServer(options);
    await new Promise((resolve) => server.socket.bind(0, '127.0.0.1', resolve));
    server.port = server.socket.address().port;
    server.address = `127.0.0.1:${server.port}`;
    return server;
  }

  constructor({ node = 5, key = null, handler = (request, server) => server.issue(request), perRange = 4096, firstId } = {}) {
    this.node = node;
    this.key = key;
    this.handler = handler;
    this.perRange = perRange;
    this.nextId = firstId ?? (BigInt(node) << 40n) + 1000n;
    this.issued = 0;
    this.requests = [];
    this.socket = dgram.createSocket('udp4');
    this.socket.on('message', (datagram, from) => this.#onMessage(datagram, from));
  }

  #onMessage(datagram, from) {
    const request = parseRequest(datagram, this.key);
    request.from = from;
    this.requests.push(request);
    let reply = this.handler(request, this);
    if (reply === undefined || reply === null) return;
    if (!Buffer.isBuffer(reply) && !Array.isArray(reply)) reply = this.answer(request, reply);
    for (const datagramOut of Array.isArray(reply) ? reply : [reply]) this.socket.send(datagramOut, from.port, from.address);
  }

  /** Sends raw bytes from this server's socket to 127.0.0.1:port. */
  sendTo(datagram, port) {
    this.socket.send(datagram, port, '127.0.0.1');
  }

  /** The answer `spec` describes for `request`, signed when the request was and the key is known. */
  answer(request, spec = {}) {
    const body = wire.encodeResponse(
      {
        opcode: spec.opcode ?? request.opcode,
        status: spec.status ?? wire.Status.OK,
        node: spec.node ?? this.node,
        requestId: spec.requestId ?? request.requestId,
        detail: spec.detail ?? 0,
        rangeCount: spec.rangeCount,
      },
      { ranges: spec.ranges ?? [], info: spec.info ?? null },
    );
    if (request.signed && this.key && spec.sign !== false) return wire.signAnswer(body, request.mac, this.key.secret);
    return body;
  }

  /** The next IDs for `request` (count capped at `count`), as an OK answer spec. */
  issue(request, { count = request.count, node } = {}) {
    // The 3x rule; a signed answer's MAC counts in it.
    const room = wire.responseSizeMax(request.size) - wire.RESPONSE_HEADER_SIZE - (request.signed ? wire.ANSWER_MAC_SIZE : 0);
    const allowance = Math.min(255, Math.floor(room / wire.RANGE_SIZE));
    const ranges = [];
    let left = count;
    while (left > 0 && ranges.length < Math.max(1, allowance)) {
      const take = Math.min(left, this.perRange);
      ranges.push({ first: this.nextId, count: take });
      this.nextId += BigInt(take) + 7n; // gaps between ranges, as between time units
      left -= take;
      this.issued += take;
    }
    return { status: wire.Status.OK, ranges, node };
  }

  requestsOf(opcode) {
    return this.requests.filter((request) => request.opcode === opcode);
  }

  close() {
    return new Promise((resolve) => this.socket.close(resolve));
  }
}

/** What a request says: header fields, name, and the signed trailer with its MAC checked. */
export function parseRequest(datagram, key) {
  const request = {
    size: datagram.length,
    raw: Buffer.from(datagram),
    opcode: datagram[3],
    flags: datagram.readUInt16BE(4),
    count: datagram.readUInt32BE(8),
    requestId: datagram.readBigUInt64BE(12),
    signed: false,
  };
  if (request.opcode === wire.Opcode.GET_SEQ && datagram.length > 20) {
    request.name = datagram.subarray(21, 21 + datagram[20]).toString('latin1');
  }
  if ((request.flags & wire.FLAG_AUTH) !== 0 && datagram.length >= wire.SIGNED_REQUEST_SIZE_MIN) {
    const at = datagram.length - wire.AUTH_TRAILER_SIZE;
    request.signed = true;
    request.keyId = datagram.readUInt32BE(at);
    request.server = datagram.readUInt32BE(at + 4);
    request.timestampUs = datagram.readBigUInt64BE(at + 8);
    request.mac = Buffer.from(datagram.subarray(datagram.length - 8));
    if (key) {
      // Re-sign the same bytes: the MAC verifies when the re-encoded one matches.
      const resigned = wire.encodeSignedRequest(
        { opcode: request.opcode, flags: request.flags & ~wire.FLAG_AUTH, count: request.count, requestId: request.requestId, name: request.name },
        datagram.length,
        key,
        request.server,
        request.timestampUs,
      );
      request.macValid = resigned.equals(datagram);
    }
  }
  return request;
}
