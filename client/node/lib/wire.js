// client/node/lib/wire.js — the bytes of flurry wire protocol v1 (proto/PROTOCOL.md): encoding
// requests (plain and signed), decoding answers by the rules of "Response decoding" 1-12, the
// answer MAC, and the padding rule of "Anti-amplification". Also encodes answers and signs
// them, which only servers do: the tests' fake servers and the vectors use it.
//
// Contract: pure functions of their arguments; every multi-byte integer big-endian. IDs,
// request ids and range firsts are bigint; counts, node ids and details are numbers.
// decodeResponse never throws and never reads outside the datagram: it returns the first rule
// that fails (PROTOCOL.md's ResponseError names) or 'ok'. The encoders throw RangeError on
// arguments outside the protocol (a caller's bug, never network input).

import { sipHashWords, writeWordLe } from './siphash.js';

export const MAGIC = 0x464c; // "FL"
export const WIRE_VERSION = 1;
export const REQUEST_HEADER_SIZE = 20;
export const RESPONSE_HEADER_SIZE = 20;
export const RANGE_SIZE = 12;
export const INFO_BODY_SIZE = 16;
export const DATAGRAM_SIZE_MAX = 1472;
export const AMPLIFICATION_MAX = 3;
export const COUNT_MAX = 1 << 20;
export const SEQ_NAME_SIZE_MAX = 32;
export const OPCODE_RESPONSE_BIT = 0x80;
export const FLAG_AUTH = 0x0001;
export const AUTH_TRAILER_SIZE = 24; // key id 4, server 4, timestamp 8, MAC 8
export const ANSWER_MAC_SIZE = 8;
export const SIGNED_REQUEST_SIZE_MIN = REQUEST_HEADER_SIZE + AUTH_TRAILER_SIZE; // 44
export const ANY_SERVER = 0xffffffff; // a signed request's `server` before the node id is known
export const NOT_OWNER_UNKNOWN = 0xffffffff;
export const FENCED_LOST = 0;
export const FENCED_DRAINING = 1;
export const ID_LIMIT = 1n << 63n; // IDs and sequence numbers are below 2^63

export const Opcode = Object.freeze({ GET_IDS: 1, PING: 2, INFO: 3, GET_SEQ: 4 });
export const Status = Object.freeze({
  OK: 0,
  RETRY: 1,
  BAD_REQUEST: 2,
  UNAUTHORIZED: 3,
  FENCED: 4,
  UNKNOWN_SEQUENCE: 5,
  NOT_OWNER: 6,
  EXHAUSTED: 7,
});

const OPCODE_NAMES = { 1: 'GET_IDS', 2: 'PING', 3: 'INFO', 4: 'GET_SEQ' };
const STATUS_NAMES = [
  'OK',
  'RETRY',
  'BAD_REQUEST',
  'UNAUTHORIZED',
  'FENCED',
  'UNKNOWN_SEQUENCE',
  'NOT_OWNER',
  'EXHAUSTED',
];

// PROTOCOL.md "Request errors" and "Authentication": the number a BAD_REQUEST or UNAUTHORIZED
// answer carries in `detail`.
export const REQUEST_ERRORS = Object.freeze({
  1: 'too_short',
  2: 'bad_magic',
  3: 'too_long',
  4: 'is_response',
  16: 'bad_version',
  17: 'bad_opcode',
  18: 'bad_flags',
  19: 'reserved_nonzero',
  20: 'count_zero',
  21: 'count_too_large',
  22: 'trailing_bytes',
  23: 'count_unexpected',
  24: 'name_missing',
  25: 'name_too_long',
  26: 'name_truncated',
  27: 'name_bad',
  32: 'auth_unsupported',
  33: 'trailer_short',
  34: 'unknown_key',
  35: 'stale_timestamp',
  36: 'bad_mac',
  37: 'replay',
  38: 'replay_full',
  39: 'not_permitted',
  40: 'rate_limited',
  41: 'auth_required',
  42: 'wrong_server',
});
export const STALE_TIMESTAMP = 35;
export const WRONG_SERVER = 42;

export function opcodeName(opcode) {
  return OPCODE_NAMES[opcode] ?? `opcode ${opcode}`;
}
export function statusName(status) {
  return STATUS_NAMES[status] ?? `status ${status}`;
}
export function requestErrorName(number) {
  return REQUEST_ERRORS[number] ?? 'unknown';
}

function isSeqNameByte(c) {
  return (
    (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2e || c === 0x2d || c === 0x3a
  );
}

/** A GET_SEQ name: 1..32 chars of A-Z a-z 0-9 _ . - : (PROTOCOL.md "GET_SEQ body"). */
export function validSeqName(name) {
  if (typeof name !== 'string' || name.length < 1 || name.length > SEQ_NAME_SIZE_MAX) return false;
  for (let i = 0; i < name.length; ++i) if (!isSeqNameByte(name.charCodeAt(i))) return false;
  return true;
}

// ---- sizing (PROTOCOL.md "Anti-amplification") ----

export function responseSizeMax(requestSize) {
  return Math.min(AMPLIFICATION_MAX * requestSize, DATAGRAM_SIZE_MAX);
}
export function rangesMax(requestSize) {
  const room = responseSizeMax(requestSize);
  const ranges = room <= RESPONSE_HEADER_SIZE ? 0 : Math.floor((room - RESPONSE_HEADER_SIZE) / RANGE_SIZE);
  return Math.min(ranges, 255);
}
/** The request size that buys `ranges` ranges in its answer. */
export function requestSizeForRanges(ranges) {
  const response = RESPONSE_HEADER_SIZE + ranges * RANGE_SIZE;
  return Math.max(REQUEST_HEADER_SIZE, Math.ceil(response / AMPLIFICATION_MAX));
}
/** ceil(count / idsPerRange) + 1 ranges (the first may start mid-unit), at most 121. */
export function rangesForIds(count, idsPerRange) {
  const perRange = idsPerRange > 0 ? idsPerRange : 1;
  return Math.min(Math.ceil(count / perRange) + 1, rangesMax(DATAGRAM_SIZE_MAX));
}
export function requestSizeForIds(count, idsPerRange) {
  return requestSizeForRanges(rangesForIds(count, idsPerRange));
}

// ---- requests ----

function bodySize(request) {
  return request.opcode === Opcode.GET_SEQ ? 1 + Buffer.byteLength(request.name ?? '', 'latin1') : 0;
}

/**
 * A request: header, GET_SEQ's name, zero padding up to `paddedSize` (grown to fit the body).
 * request: {opcode, flags?, count, requestId: bigint, name?: string}.
 */
export function encodeRequest(request, paddedSize = REQUEST_HEADER_SIZE) {
  const size = Math.max(paddedSize, REQUEST_HEADER_SIZE + bodySize(request));
  if (size > DATAGRAM_SIZE_MAX) throw new RangeError(`a request of ${size} bytes is above ${DATAGRAM_SIZE_MAX}`);
  const out = Buffer.alloc(size); // zero: the padding
  out.writeUInt16BE(MAGIC, 0);
  out[2] = WIRE_VERSION;
  out[3] = request.opcode;
  out.writeUInt16BE(request.flags ?? 0, 4);
  out.writeUInt32BE(request.count, 8);
  out.writeBigUInt64BE(request.requestId, 12);
  if (request.opcode === Opcode.GET_SEQ) {
    const name = Buffer.from(request.name, 'latin1');
    out[REQUEST_HEADER_SIZE] = name.length;
    name.copy(out, REQUEST_HEADER_SIZE + 1);
  }
  return out;
}

const macWords = new Uint32Array(2);

// SipHash-2-4 of data[0, end) into out[at, at + 8), in SipHash's byte order.
function macInto(secret, data, end, out, at) {
  sipHashWords(secret, data, 0, end, macWords);
  writeWordLe(out, at, macWords[0], macWords[1]);
}

/**
 * A signed request of `size` bytes (grown to hold the body and the 24-byte trailer): flag_auth
 * set, then key id, server (the node id it is for, or ANY_SERVER), timestamp_us (bigint) and the
 * MAC over every byte before it. key: {id: number, secret: Uint8Array(16)}.
 */
export function encodeSignedRequest(request, size, key, server, timestampUs) {
  const least = REQUEST_HEADER_SIZE + bodySize(request) + AUTH_TRAILER_SIZE;
  const total = Math.max(size, least, SIGNED_REQUEST_SIZE_MIN);
  if (total > DATAGRAM_SIZE_MAX) throw new RangeError(`a signed request of ${total} bytes is above ${DATAGRAM_SIZE_MAX}`);
  const out = encodeRequest({ ...request, flags: (request.flags ?? 0) | FLAG_AUTH }, total);
  const trailer = total - AUTH_TRAILER_SIZE;
  out.writeUInt32BE(key.id, trailer);
  out.writeUInt32BE(server, trailer + 4);
  out.writeBigUInt64BE(timestampUs, trailer + 8);
  macInto(key.secret, out, total - ANSWER_MAC_SIZE, out, total - ANSWER_MAC_SIZE);
  return out;
}

/** The 8 MAC bytes ending a signed request (a view into it). */
export function requestMac(signedRequest) {
  return signedRequest.subarray(signedRequest.length - ANSWER_MAC_SIZE);
}

/**
 * An answer with its MAC appended: SipHash-2-4 over the answer, then the request's 8 MAC bytes.
 */
export function signAnswer(answer, requestMacBytes, secret) {
  const out = Buffer.alloc(answer.length + ANSWER_MAC_SIZE);
  out.set(answer, 0);
  out.set(requestMacBytes, answer.length);
  macInto(secret, out, out.length, out, answer.length);
  return out;
}

const verifyBuffer = Buffer.alloc(DATAGRAM_SIZE_MAX);

/**
 * Whether `answer` ends with the right MAC for the request whose MAC bytes are
 * `requestMacBytes`. Too short (under 28 bytes) or too long: false. Reads only `answer`.
 */
export function verifyAnswer(answer, requestMacBytes, secret) {
  if (answer.length < RESPONSE_HEADER_SIZE + ANSWER_MAC_SIZE || answer.length > DATAGRAM_SIZE_MAX) return false;
  const body = answer.length - ANSWER_MAC_SIZE;
  verifyBuffer.set(answer.subarray(0, body), 0);
  verifyBuffer.set(requestMacBytes, body);
  sipHashWords(secret, verifyBuffer, 0, answer.length, macWords);
  const expected = Buffer.alloc(ANSWER_MAC_SIZE);
  writeWordLe(expected, 0, macWords[0], macWords[1]);
  // Compared whole, without an early exit on the first differing byte.
  let differ = 0;
  for (let i = 0; i < ANSWER_MAC_SIZE; ++i) differ |= expected[i] ^ answer[body + i];
  return differ === 0;
}

// ---- responses ----

/**
 * Checks a datagram by PROTOCOL.md "Response decoding" rules 1-12. Returns
 * {error, header, ranges, info}: `error` is 'ok' or the first rule that failed; `header` is
 * filled once the response bit was seen (opcode without the bit, status, rangeCount, node,
 * requestId: bigint, detail); `ranges` [{first: bigint, count}] and `info` only when 'ok'.
 */
export function decodeResponse(datagram) {
  const result = { error: 'ok', header: null, ranges: [], info: null };
  const fail = (error) => {
    result.error = error;
    result.ranges = [];
    return result;
  };
  if (datagram.length < RESPONSE_HEADER_SIZE) return fail('too_short');
  const view = Buffer.isBuffer(datagram) ? datagram : Buffer.from(datagram.buffer, datagram.byteOffset, datagram.length);
  if (view.readUInt16BE(0) !== MAGIC) return fail('bad_magic');
  if (view.length > DATAGRAM_SIZE_MAX) return fail('too_long');
  if (view[2] !== WIRE_VERSION) return fail('bad_version');
  if ((view[3] & OPCODE_RESPONSE_BIT) === 0) return fail('not_response');
  const header = {
    opcode: view[3] & ~OPCODE_RESPONSE_BIT,
    status: view[4],
    rangeCount: view[5],
    node: view.readUInt16BE(6),
    requestId: view.readBigUInt64BE(8),
    detail: view.readUInt32BE(16),
  };
  result.header = header;
  if (header.status > Status.EXHAUSTED) return fail('bad_status');
  const knownOpcode = header.opcode >= Opcode.GET_IDS && header.opcode <= Opcode.GET_SEQ;
  if (!knownOpcode && header.status !== Status.BAD_REQUEST) return fail('bad_opcode');
  const getSeq = header.opcode === Opcode.GET_SEQ;
  const issues = header.opcode === Opcode.GET_IDS || getSeq;
  if (!issues && (header.status === Status.RETRY || header.status === Status.FENCED || header.status === Status.EXHAUSTED)) {
    return fail('status_unexpected');
  }
  if (!getSeq && (header.status === Status.UNKNOWN_SEQUENCE || header.status === Status.NOT_OWNER)) {
    return fail('status_unexpected');
  }
  const carriesRanges = issues && header.status === Status.OK;
  if (!carriesRanges && header.rangeCount !== 0) return fail('ranges_unexpected');
  if (carriesRanges && header.rangeCount === 0) return fail('ranges_missing');
  const isInfo = header.opcode === Opcode.INFO && header.status === Status.OK;
  const expected = isInfo ? INFO_BODY_SIZE : header.rangeCount * RANGE_SIZE;
  if (view.length - RESPONSE_HEADER_SIZE !== expected) return fail('bad_length');
  let nextFree = 0n; // every ID below this is in an earlier range
  for (let i = 0; i < header.rangeCount; ++i) {
    const at = RESPONSE_HEADER_SIZE + i * RANGE_SIZE;
    const first = view.readBigUInt64BE(at);
    const count = view.readUInt32BE(at + 8);
    if (count === 0 || first < nextFree || first >= ID_LIMIT || ID_LIMIT - first < BigInt(count)) return fail('bad_range');
    nextFree = first + BigInt(count);
    result.ranges.push({ first, count });
  }
  if (isInfo) result.info = decodeInfo(view, RESPONSE_HEADER_SIZE);
  return result;
}

function decodeInfo(view, at) {
  return {
    epochMs: view.readBigUInt64BE(at),
    timeUnitMs: view.readUInt16BE(at + 8),
    timeBits: view[at + 10],
    nodeBits: view[at + 11],
    sequenceBits: view[at + 12],
    coreBits: view[at + 13],
    coreFrom: view[at + 14],
    workers: view[at + 15],
  };
}

/**
 * An answer: the header, then the ranges or the INFO body. header: {opcode (without the
 * response bit), status, rangeCount?, node, requestId: bigint, detail}; rangeCount defaults to
 * ranges.length. For servers and tests; a client never sends one.
 */
export function encodeResponse(header, { ranges = [], info = null } = {}) {
  const size = RESPONSE_HEADER_SIZE + (info ? INFO_BODY_SIZE : 0) + ranges.length * RANGE_SIZE;
  const out = Buffer.alloc(size);
  out.writeUInt16BE(MAGIC, 0);
  out[2] = WIRE_VERSION;
  out[3] = (header.opcode | OPCODE_RESPONSE_BIT) & 0xff;
  out[4] = header.status;
  out[5] = header.rangeCount ?? ranges.length;
  out.writeUInt16BE(header.node, 6);
  out.writeBigUInt64BE(header.requestId, 8);
  out.writeUInt32BE(header.detail ?? 0, 16);
  let at = RESPONSE_HEADER_SIZE;
  if (info) {
    out.writeBigUInt64BE(BigInt(info.epochMs), at);
    out.writeUInt16BE(info.timeUnitMs, at + 8);
    out[at + 10] = info.timeBits;
    out[at + 11] = info.nodeBits;
    out[at + 12] = info.sequenceBits;
    out[at + 13] = info.coreBits;
    out[at + 14] = info.coreFrom;
    out[at + 15] = info.workers;
    at += INFO_BODY_SIZE;
  }
  for (const range of ranges) {
    out.writeBigUInt64BE(range.first, at);
    out.writeUInt32BE(range.count, at + 8);
    at += RANGE_SIZE;
  }
  return out;
}
