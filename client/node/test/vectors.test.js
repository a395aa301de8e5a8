// client/node/test/vectors.test.js — the client against the documents it implements, byte for
// byte: every vector of proto/PROTOCOL.md (FLURRY_PROTOCOL_MD), the SipHash paper's vector and
// the reference implementation's table, every ID form of client/forms-vectors.json
// (FLURRY_FORMS_VECTORS), and the version against ../../VERSION. Pure: no socket, no clock.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  KeyRing,
  Layout,
  OpaqueKey,
  VERSION,
  formatId,
  formatUnixMs,
  parseAnyId,
  parseId,
  siphash24,
  wire,
} from '../index.js';
import { loadVectors } from './protocol_vectors.js';

const clientDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { vectors, declared } = loadVectors();
const byKind = (kind) => [...vectors.values()].filter((vector) => vector.kind === kind);

// What the first 20 bytes of a request say, read at their offsets with nothing checked.
function requestFields(bytes) {
  return {
    opcode: BigInt(bytes[3]),
    flags: BigInt(bytes.readUInt16BE(4)),
    count: BigInt(bytes.readUInt32BE(8)),
    request_id: bytes.readBigUInt64BE(12),
  };
}

// The same for a response (opcode without the response bit).
function responseFields(bytes) {
  return {
    opcode: BigInt(bytes[3] & 0x7f),
    status: BigInt(bytes[4]),
    range_count: BigInt(bytes[5]),
    node: BigInt(bytes.readUInt16BE(6)),
    request_id: bytes.readBigUInt64BE(8),
    detail: BigInt(bytes.readUInt32BE(16)),
  };
}

function keyOf(vector) {
  return { id: Number(vector.keyParsed.id), secret: Uint8Array.from(Buffer.from(vector.key.split('secret=')[1], 'hex')) };
}

test('vectors: PROTOCOL.md is read whole', () => {
  assert.ok(declared !== null, 'the "<!-- N vectors -->" comment is missing');
  assert.equal(vectors.size, declared);
  for (const kind of ['request', 'response', 'id', 'signed', 'server']) assert.ok(byKind(kind).length > 0, kind);
  for (const name of [
    'signed_get_ids',
    'signed_ping_padded',
    'signed_get_ids_any_server',
    'signed_get_ids_stale',
    'get_ids_draining_answer',
    'get_ids_exhausted_answer',
    'resp_status_unexpected_exhausted',
    'resp_bad_status',
  ]) {
    assert.ok(vectors.has(name), name);
  }
});

test('vectors: every request encodes byte for byte, and its fields are its bytes', () => {
  let encoded = 0;
  for (const vector of byKind('request')) {
    if (vector.fieldsParsed) assert.deepEqual(requestFields(vector.bytes), { ...vector.fieldsParsed }, vector.name);
    if (vector.encode !== 'yes') continue;
    const f = vector.fieldsParsed;
    const request = { opcode: Number(f.opcode), flags: Number(f.flags), count: Number(f.count), requestId: f.request_id };
    if (vector.seqName !== undefined) request.name = vector.seqName;
    assert.deepEqual(wire.encodeRequest(request, vector.bytes.length), vector.bytes, vector.name);
    encoded += 1;
  }
  assert.ok(encoded >= 20, `only ${encoded} requests encoded`);
});

test('vectors: every response decodes to its outcome; the ok ones encode back', () => {
  for (const vector of byKind('response')) {
    const view = wire.decodeResponse(vector.bytes);
    assert.equal(view.error, vector.decode, vector.name);
    if (vector.fieldsParsed) assert.deepEqual(responseFields(vector.bytes), { ...vector.fieldsParsed }, vector.name);
    if (view.error !== 'ok') {
      assert.deepEqual(view.ranges, [], `${vector.name}: nothing used from a rejected datagram`);
      continue;
    }
    const f = vector.fieldsParsed;
    assert.deepEqual(
      view.header,
      {
        opcode: Number(f.opcode),
        status: Number(f.status),
        rangeCount: Number(f.range_count),
        node: Number(f.node),
        requestId: f.request_id,
        detail: Number(f.detail),
      },
      vector.name,
    );
    assert.deepEqual(
      view.ranges,
      vector.ranges.map((range) => ({ first: range.first, count: Number(range.count) })),
      vector.name,
    );
    let info = null;
    if (vector.infoParsed) {
      const i = vector.infoParsed;
      info = {
        epochMs: i.epoch_ms,
        timeUnitMs: Number(i.time_unit_ms),
        timeBits: Number(i.time_bits),
        nodeBits: Number(i.node_bits),
        sequenceBits: Number(i.sequence_bits),
        coreBits: Number(i.core_bits),
        coreFrom: Number(i.core_from),
        workers: Number(i.workers),
      };
      assert.deepEqual(view.info, info, vector.name);
    }
    assert.deepEqual(wire.encodeResponse(view.header, { ranges: view.ranges, info }), vector.bytes, `${vector.name} encoded`);
  }
});

test('vectors: every answer a request names is one the client accepts for it', () => {
  let checked = 0;
  for (const vector of byKind('request')) {
    if (vector.decode !== 'ok' || vector.answer === 'none') continue;
    const answer = vectors.get(vector.answer);
    assert.ok(answer, `${vector.name}: answer ${vector.answer} is missing`);
    const view = wire.decodeResponse(answer.bytes);
    assert.equal(view.error, 'ok', answer.name);
    assert.equal(view.header.requestId, vector.fieldsParsed.request_id, answer.name);
    assert.equal(view.header.opcode, Number(vector.fieldsParsed.opcode), answer.name);
    const ids = view.ranges.reduce((sum, range) => sum + range.count, 0);
    assert.ok(ids <= Number(vector.fieldsParsed.count), `${answer.name}: never more IDs than asked`);
    checked += 1;
  }
  assert.ok(checked >= 15);
});

test('vectors: signed requests encode byte for byte; their answers verify and decode', () => {
  const requests = byKind('signed').filter((vector) => vector.trailer !== undefined);
  assert.equal(requests.length, 4);
  for (const vector of requests) {
    const f = vector.fieldsParsed;
    const t = vector.trailerParsed;
    const key = keyOf(vector);
    assert.equal(BigInt(key.id), t.key_id, vector.name);
    const request = { opcode: Number(f.opcode), count: Number(f.count), requestId: f.request_id };
    const bytes = wire.encodeSignedRequest(request, vector.bytes.length, key, Number(t.server), t.timestamp_us);
    assert.deepEqual(bytes, vector.bytes, vector.name);
    assert.deepEqual(requestFields(bytes), { ...f }, vector.name);
    assert.equal(Buffer.from(wire.requestMac(bytes)).readBigUInt64BE(0), t.mac, `${vector.name} mac`);
    // server_clock_ms is the reference server's clock: the timestamp is its microseconds, or
    // (the stale vector) 6 s behind it.
    assert.ok(vector.server_clock_ms !== undefined, vector.name);

    const answer = vectors.get(vector.answer);
    assert.ok(answer, `${vector.name}: answer ${vector.answer}`);
    assert.equal(BigInt(`0x${answer.request_mac.slice(2)}`), t.mac, answer.name);
    const requestMac = wire.requestMac(bytes);
    assert.ok(wire.verifyAnswer(answer.bytes, requestMac, key.secret), `${answer.name} verifies`);
    assert.equal(answer.bytes.readBigUInt64BE(answer.bytes.length - 8), BigInt(answer.answer_mac), answer.name);
    const body = answer.bytes.subarray(0, answer.bytes.length - 8);
    const view = wire.decodeResponse(body);
    assert.equal(view.error, 'ok', answer.name);
    assert.deepEqual(responseFields(body), { ...answer.fieldsParsed }, answer.name);
    assert.equal(view.header.requestId, f.request_id, answer.name);
    assert.deepEqual(wire.signAnswer(body, requestMac, key.secret), answer.bytes, `${answer.name} signed again`);
    // Bound to this request and this key: any other MAC, secret or byte fails.
    const otherMac = Buffer.from(requestMac);
    otherMac[0] ^= 1;
    assert.equal(wire.verifyAnswer(answer.bytes, otherMac, key.secret), false, answer.name);
    const otherSecret = Uint8Array.from(key.secret);
    otherSecret[15] ^= 1;
    assert.equal(wire.verifyAnswer(answer.bytes, requestMac, otherSecret), false, answer.name);
    for (let i = 0; i < answer.bytes.length; ++i) {
      const tampered = Buffer.from(answer.bytes);
      tampered[i] ^= 0x40;
      assert.equal(wire.verifyAnswer(tampered, requestMac, key.secret), false, `${answer.name} byte ${i}`);
    }
    assert.equal(wire.verifyAnswer(body, requestMac, key.secret), false, `${answer.name}: unsigned`);
  }
  const wrongServer = wire.decodeResponse(vectors.get('signed_get_ids_any_server_answer').bytes.subarray(0, 20));
  assert.equal(wrongServer.header.detail, wire.WRONG_SERVER);
  assert.equal(wrongServer.header.node, 5);
  const stale = wire.decodeResponse(vectors.get('signed_get_ids_stale_answer').bytes.subarray(0, 20));
  assert.equal(wire.requestErrorName(stale.header.detail), 'stale_timestamp');
});

test('vectors: every ID decodes to its fields and composes back', () => {
  for (const vector of byKind('id')) {
    const l = vector.layoutParsed;
    const layout = new Layout({
      timeBits: Number(l.time_bits),
      nodeBits: Number(l.node_bits),
      sequenceBits: Number(l.sequence_bits),
      coreBits: Number(l.core_bits),
      coreFrom: l.core_from,
      epochMs: l.epoch_ms,
      timeUnitMs: Number(l.time_unit_ms),
    });
    layout.validate();
    const id = BigInt(vector.id);
    assert.equal(id, BigInt(vector.id_hex), vector.name);
    const f = vector.fieldsParsed;
    assert.deepEqual(
      layout.decode(id),
      { time: f.time, unixMs: f.unix_ms, node: Number(f.node), core: Number(f.core), counter: Number(f.counter) },
      vector.name,
    );
    assert.equal(layout.compose(f.time, f.node, f.core, f.counter), id, vector.name);
    assert.equal(formatUnixMs(f.unix_ms), vector.utc, vector.name);
  }
});

test('vectors: the sizing rule matches the worked examples', () => {
  assert.equal(wire.rangesMax(20), 3);
  assert.equal(wire.rangesMax(27), 5);
  assert.equal(wire.rangesMax(403), 99);
  assert.equal(wire.rangesMax(491), 121);
  assert.equal(wire.rangesMax(1472), 121);
  assert.equal(wire.requestSizeForIds(20000, 4096), 31);
  assert.equal(wire.requestSizeForIds(100000, 1024), 403);
  assert.equal(wire.rangesForIds(1 << 20, 4096), 121);
  assert.equal(wire.requestSizeForRanges(121), 491);
});

test('vectors: decoding survives every truncation, trailing bytes and an oversize datagram', () => {
  for (const vector of byKind('response')) {
    if (vector.decode !== 'ok') continue;
    for (let size = 0; size < vector.bytes.length; ++size) {
      assert.notEqual(wire.decodeResponse(vector.bytes.subarray(0, size)).error, 'ok', `${vector.name} cut to ${size}`);
    }
    for (const extra of [1, 7, 12, 13]) {
      const longer = Buffer.concat([vector.bytes, Buffer.alloc(extra, 0xa5)]);
      assert.equal(wire.decodeResponse(longer).error, 'bad_length', `${vector.name} + ${extra}`);
    }
  }
  const oversize = Buffer.alloc(1473);
  vectors.get('get_ids_basic_answer').bytes.copy(oversize);
  assert.equal(wire.decodeResponse(oversize).error, 'too_long');
});

test('vectors: SipHash-2-4 gives the paper vector and the reference table', () => {
  const key = Uint8Array.from({ length: 16 }, (_, i) => i);
  // The paper (Aumasson, Bernstein 2012, appendix A): 15 bytes 00..0e -> a129ca6149be45e5.
  const paper = siphash24(key, Uint8Array.from({ length: 15 }, (_, i) => i));
  assert.equal(Buffer.from(paper).readBigUInt64LE(0), 0xa129ca6149be45e5n);
  // The reference implementation's vectors_sip64: message i is the bytes 0..i-1.
  const table = [
    '310e0edd47db6f72', 'fd67dc93c539f874', '5a4fa9d909806c0d', '2d7efbd796666785',
    'b7877127e09427cf', '8da699cd64557618', 'cee3fe586e46c9cb', '37d1018bf50002ab',
    '6224939a79f5f593', 'b0e4a90bdf82009e', 'f3b9dd94c5bb5d7a', 'a7ad6b22462fb3f4',
    'fbe50e86bc8f1e75', '903d84c02756ea14', 'eef27a8e90ca23f7', 'e545be4961ca29a1',
    'db9bc2577fcc2a3f', '9447be2cf5e99a69', '9cd38d96f0b3c14b', 'bd6179a71dc96dbb',
    '98eea21af25cd6be', 'c7673b2eb0cbf2d0', '883ea3e395675393', 'c8ce5ccd8c030ca8',
    '94af49f6c650adb8', 'eab8858ade92e1bc', 'f315bb5bb835d817', 'adcf6b0763612e2f',
    'a5c91da7acaa4dde', '716595876650a2a6', '28ef495c53a387ad', '42c341d8fa92d832',
    'ce7cf2722f512771', 'e37859f94623f3a7', '381205bb1ab0e012', 'ae97a10fd434e015',
    'b4a31508beff4d31', '81396229f0907902', '4d0cf49ee5d4dcca', '5c73336a76d8bf9a',
    'd0a704536ba93e0e', '925958fcd6420cad', 'a915c29bc8067318', '952b79f3bc0aa6d4',
    'f21df2e41d4535f9', '87577519048f53a9', '10a56cf5dfcd9adb', 'eb75095ccd986cd0',
    '51a9cb9ecba312e6', '96afadfc2ce666c7', '72fe52975a4364ee', '5a1645b276d592a1',
    'b274cb8ebf87870a', '6f9bb4203de7b381', 'eaecb2a30b22a87f', '9924a43cc1315724',
    'bd838d3aafbf8db7', '0b1a2a3265d51aea', '135079a3231ce660', '932b2846e4d70666',
    'e1915f5cb1eca46c', 'f325965ca16d629f', '575ff28e60381be5', '724506eb4c328a95',
  ];
  for (let i = 0; i < table.length; ++i) {
    const out = siphash24(key, Uint8Array.from({ length: i }, (_, j) => j));
    assert.equal(Buffer.from(out).toString('hex'), table[i], `message of ${i} bytes`);
  }
});

// ---- forms ----

function formsPath() {
  return process.env.FLURRY_FORMS_VECTORS || path.resolve(clientDir, '../forms-vectors.json');
}

const forms = JSON.parse(readFileSync(formsPath(), 'utf8'));
const formKeys = new KeyRing([{ id: forms.key.id, secret: forms.key.secret }]);

function layoutOf(fields) {
  return new Layout({
    timeBits: fields.time_bits,
    nodeBits: fields.node_bits,
    sequenceBits: fields.sequence_bits,
    timeUnitMs: fields.time_unit_ms,
    epochMs: BigInt(fields.epoch_ms),
  });
}

test('forms: every ID formats to every text, and every text parses back', () => {
  assert.ok(forms.layouts.length >= 5);
  for (const entry of forms.layouts) {
    const layout = layoutOf(entry.layout);
    assert.ok(entry.ids.length > 0, entry.name);
    for (const v of entry.ids) {
      const id = BigInt(v.id);
      const where = `${entry.name} ${v.id}`;
      for (const form of ['dec', 'hex', 'base32', 'readable', 'opaque', 'uuid']) {
        assert.equal(formatId(form, id, { layout, keys: formKeys }), v[form], `${where} ${form}`);
        assert.equal(parseId(form, v[form], { layout, keys: formKeys }).id, id, `${where} ${form} parsed`);
      }
      assert.equal(formatId('readable', id, { layout, tag: forms.tag }), v.readable_tagged, where);
      const tagged = parseId('readable', v.readable_tagged, { layout });
      assert.deepEqual([tagged.id, tagged.tag], [id, forms.tag], where);
      assert.equal(formatId('dec', v.dec), v.dec, `${where}: an ID given as a decimal string`);
      // The uuid is RFC 9562 version 7, variant 10 (Node has no UUID type to ask).
      assert.equal(v.uuid[14], '7', where);
      assert.ok('89ab'.includes(v.uuid[19]), where);
    }
    for (const [form, texts] of Object.entries(entry.refused)) {
      for (const text of texts) {
        assert.throws(() => parseId(form, text, { layout, keys: formKeys }), { code: 'invalid_argument' }, `${entry.name} ${form} '${text}'`);
      }
    }
  }
});

test('forms: also_reads texts parse to their IDs; refused texts fail', () => {
  for (const entry of forms.also_reads) {
    assert.equal(parseId(entry.form, entry.text, { keys: formKeys }).id, BigInt(entry.id), `${entry.form} '${entry.text}'`);
  }
  for (const [form, texts] of Object.entries(forms.refused)) {
    for (const text of texts) assert.throws(() => parseId(form, text, { keys: formKeys }), { code: 'invalid_argument' }, `${form} '${text}'`);
  }
});

test('forms: opaque known answers, key rings, and parseAnyId', () => {
  const key = new OpaqueKey('k1', '000102030405060708090a0b0c0d0e0f');
  assert.equal(key.encrypt(0n), 7704551156889774887n);
  assert.equal(key.encrypt(1n), 7614573489595586949n);
  assert.equal(key.encrypt(4194324487n), 3263842716310771651n);
  assert.equal(key.format(4194324487n), 'k1_2TJVZN1P765Y3');
  for (const x of [0n, 1n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 63n - 1n, 1234567890123456789n]) assert.equal(key.decrypt(key.encrypt(x)), x);
  const ring = KeyRing.parse('current = "k2"\n[[key]]\nid = "k1"\nsecret = "000102030405060708090a0b0c0d0e0f"\n' +
    '[[key]]\nid = "k2"  # new IDs\nsecret = "0f0e0d0c0b0a09080706050403020100"\n', 'ring.toml');
  assert.equal(ring.current.id, 'k2');
  assert.equal(ring.decode('k1_2TJVZN1P765Y3'), 4194324487n); // the old key still decodes
  assert.ok(ring.encode(4194324487n).startsWith('k2_'));
  assert.throws(() => KeyRing.parse('[[key]]\nid = "k1"\nsecret = "00"\n', 'bad.toml'), /bad.toml: key 1 \(k1\): secret must be 32 hex digits/);
  assert.throws(() => KeyRing.parse('[[key]]\nid="a"\nsecret="000102030405060708090a0b0c0d0e0f"\n[[key]]\nid="b"\nsecret="000102030405060708090a0b0c0d0e0f"\n', 'two.toml'), /no current/);
  assert.throws(() => new OpaqueKey('k1', '00000000000000000000000000000000'), /all zero/);
  const layout = Layout.preset('snowflake');
  assert.equal(parseAnyId('0x00000000fa005007').id, 4194324487n);
  assert.equal(parseAnyId('k1_2TJVZN1P765Y3', { keys: ring }).form, 'opaque');
  assert.equal(parseAnyId('018cc251-f7e8-7000-8000-0000fa005007', { layout }).form, 'uuid');
  assert.throws(() => parseAnyId('1234567890123'), /reads as dec .* and as base32/);
  assert.throws(() => formatId('readable', 1n), /needs the ID layout/);
  assert.throws(() => formatId('dec', 1n, { tag: 'ORD' }), /readable form only/);
  assert.throws(() => formatId('dec', 2n ** 63n), { code: 'invalid_argument' });
});

test('version: the client, package.json and ../../VERSION agree', () => {
  const project = readFileSync(path.resolve(clientDir, '../../VERSION'), 'utf8').trim();
  const pkg = JSON.parse(readFileSync(path.resolve(clientDir, 'package.json'), 'utf8'));
  assert.match(project, /^\d+\.\d+\.\d+$/);
  assert.equal(VERSION, project);
  assert.equal(pkg.version, project);
});
