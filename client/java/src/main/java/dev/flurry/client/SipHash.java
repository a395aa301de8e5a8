// client/java/.../SipHash.java — SipHash-2-4 (Aumasson and Bernstein), the MAC of
// PROTOCOL.md "Authentication", as libsodium's crypto_shorthash computes it. This client
// depends on nothing but the JDK, so it is written here; SipHashTest checks it against the
// reference implementation's table (github.com/veorq/SipHash, vectors.h).
//
// Contract: pure, no allocation, thread-safe. The key is passed as its two little-endian
// 64-bit halves (Key holds them), so nothing is decoded per call.
package dev.flurry.client;

final class SipHash {
  private SipHash() {}

  /**
   * SipHash-2-4 of {@code data[offset, offset + length)} under the key (k0, k1).
   * crypto_shorthash writes the result little-endian, so the 8 MAC bytes on the wire, read
   * big-endian, are {@code Long.reverseBytes} of it.
   */
  static long hash(long k0, long k1, byte[] data, int offset, int length) {
    long v0 = k0 ^ 0x736f6d6570736575L;
    long v1 = k1 ^ 0x646f72616e646f6dL;
    long v2 = k0 ^ 0x6c7967656e657261L;
    long v3 = k1 ^ 0x7465646279746573L;
    final int words = length / 8;
    // The last word: the length's low byte on top, the 0..7 tail bytes below it.
    long last = (long) length << 56;
    for (int i = words * 8; i < length; ++i) {
      last |= (data[offset + i] & 0xffL) << (8 * (i - words * 8));
    }
    // Steps 0..words-1 compress the whole words, step `words` the last one (2 rounds each);
    // step words + 1 is the finalization (4 rounds). One copy of the round function.
    for (int step = 0; step <= words + 1; ++step) {
      final boolean finish = step == words + 1;
      final long m = finish ? 0 : step == words ? last : littleEndian(data, offset + 8 * step);
      v3 ^= m;
      if (finish) v2 ^= 0xff;
      for (int round = finish ? 4 : 2; round > 0; --round) {
        v0 += v1;
        v1 = Long.rotateLeft(v1, 13) ^ v0;
        v0 = Long.rotateLeft(v0, 32);
        v2 += v3;
        v3 = Long.rotateLeft(v3, 16) ^ v2;
        v0 += v3;
        v3 = Long.rotateLeft(v3, 21) ^ v0;
        v2 += v1;
        v1 = Long.rotateLeft(v1, 17) ^ v2;
        v2 = Long.rotateLeft(v2, 32);
      }
      v0 ^= m;
    }
    return v0 ^ v1 ^ v2 ^ v3;
  }

  /** The 8 bytes at {@code at}, little-endian (SipHash's word order). */
  static long littleEndian(byte[] data, int at) {
    long word = 0;
    for (int i = 7; i >= 0; --i) word = word << 8 | (data[at + i] & 0xffL);
    return word;
  }
}
