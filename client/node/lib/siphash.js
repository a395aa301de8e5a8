// client/node/lib/siphash.js — SipHash-2-4 (Aumasson and Bernstein, 2012): the MAC of signed
// requests and answers (PROTOCOL.md "Authentication", libsodium's crypto_shorthash) and the
// round function of the opaque ID form (forms.js).
//
// Contract: siphash24(key, data) returns the 8 output bytes as the reference writes them
// (little-endian of the final state word), for a 16-byte key and any data. Each 64-bit word
// is held as two unsigned 32-bit halves, so nothing allocates per block and no BigInt is
// involved. Pure: no state beyond the arguments. Checked against the paper's vector and the
// reference implementation's table of 64 (test/vectors.test.js).

// The state: v0..v3 as (hi, lo) pairs, in one Uint32Array so the rounds touch no objects.
// Module scope is safe: JavaScript runs one call at a time and nothing here awaits.
const v = new Uint32Array(8); // v0h v0l v1h v1l v2h v2l v3h v3l

function add(a, b) {
  // v[a] += v[b], 64-bit wrap-around
  const lo = (v[a + 1] + v[b + 1]) >>> 0;
  const carry = lo < v[a + 1] ? 1 : 0;
  v[a] = (v[a] + v[b] + carry) >>> 0;
  v[a + 1] = lo;
}

function rotl(a, r) {
  // v[a] = rotl(v[a], r) for 0 < r < 32
  const hi = v[a];
  const lo = v[a + 1];
  v[a] = ((hi << r) | (lo >>> (32 - r))) >>> 0;
  v[a + 1] = ((lo << r) | (hi >>> (32 - r))) >>> 0;
}

function swapHalves(a) {
  // rotl(v[a], 32)
  const hi = v[a];
  v[a] = v[a + 1];
  v[a + 1] = hi;
}

function xorInto(a, b) {
  v[a] ^= v[b];
  v[a + 1] ^= v[b + 1];
}

const V0 = 0;
const V1 = 2;
const V2 = 4;
const V3 = 6;

function sipRound() {
  add(V0, V1);
  rotl(V1, 13);
  xorInto(V1, V0);
  swapHalves(V0);
  add(V2, V3);
  rotl(V3, 16);
  xorInto(V3, V2);
  add(V0, V3);
  rotl(V3, 21);
  xorInto(V3, V0);
  add(V2, V1);
  rotl(V1, 17);
  xorInto(V1, V2);
  swapHalves(V2);
}

function le32(bytes, at) {
  return (bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)) >>> 0;
}

// Absorbs the 64-bit word (hi, lo): v3 ^= m, two rounds, v0 ^= m.
function absorb(hi, lo) {
  v[V3] ^= hi;
  v[V3 + 1] ^= lo;
  sipRound();
  sipRound();
  v[V0] ^= hi;
  v[V0 + 1] ^= lo;
}

/**
 * SipHash-2-4 of data[start, end) under a 16-byte key; the result word is left in `out`
 * as [hi, lo] (unsigned 32-bit halves of the 64-bit value).
 */
export function sipHashWords(key, data, start, end, out) {
  const k0lo = le32(key, 0);
  const k0hi = le32(key, 4);
  const k1lo = le32(key, 8);
  const k1hi = le32(key, 12);
  // "somepseudorandomlygeneratedbytes"
  v[0] = (k0hi ^ 0x736f6d65) >>> 0;
  v[1] = (k0lo ^ 0x70736575) >>> 0;
  v[2] = (k1hi ^ 0x646f7261) >>> 0;
  v[3] = (k1lo ^ 0x6e646f6d) >>> 0;
  v[4] = (k0hi ^ 0x6c796765) >>> 0;
  v[5] = (k0lo ^ 0x6e657261) >>> 0;
  v[6] = (k1hi ^ 0x74656462) >>> 0;
  v[7] = (k1lo ^ 0x79746573) >>> 0;
  const size = end - start;
  const whole = start + (size - (size % 8));
  let at = start;
  for (; at < whole; at += 8) absorb(le32(data, at + 4), le32(data, at));
  // The last word: the 0..7 bytes left, and the length's low byte on top.
  let lo = 0;
  let hi = (size & 0xff) << 24;
  for (let i = 0; at + i < end; ++i) {
    const byte = data[at + i];
    if (i < 4) lo |= byte << (8 * i);
    else hi |= byte << (8 * (i - 4));
  }
  absorb(hi >>> 0, lo >>> 0);
  v[V2 + 1] ^= 0xff;
  sipRound();
  sipRound();
  sipRound();
  sipRound();
  out[0] = (v[0] ^ v[2] ^ v[4] ^ v[6]) >>> 0;
  out[1] = (v[1] ^ v[3] ^ v[5] ^ v[7]) >>> 0;
}

const words = new Uint32Array(2);

/**
 * SipHash-2-4 of `data` (a Uint8Array) under `key` (16 bytes): 8 bytes, as libsodium's
 * crypto_shorthash writes them.
 */
export function siphash24(key, data) {
  if (!(key instanceof Uint8Array) || key.length !== 16) {
    throw new TypeError('a SipHash key is 16 bytes (a Uint8Array)');
  }
  sipHashWords(key, data, 0, data.length, words);
  const out = new Uint8Array(8);
  writeWordLe(out, 0, words[0], words[1]);
  return out;
}

/** Writes the 64-bit word (hi, lo) little-endian at out[at..at+8): SipHash's output order. */
export function writeWordLe(out, at, hi, lo) {
  out[at] = lo & 0xff;
  out[at + 1] = (lo >>> 8) & 0xff;
  out[at + 2] = (lo >>> 16) & 0xff;
  out[at + 3] = lo >>> 24;
  out[at + 4] = hi & 0xff;
  out[at + 5] = (hi >>> 8) & 0xff;
  out[at + 6] = (hi >>> 16) & 0xff;
  out[at + 7] = hi >>> 24;
}
