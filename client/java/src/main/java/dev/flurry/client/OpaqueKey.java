// client/java/.../OpaqueKey.java — the opaque form of an ID (client/forms.h OpaqueKey): a keyed
// permutation of [0, 2^63), written as the key id, '_' and the permuted number in base32:
// "k1_2TJVZN1P765Y3".
//
// The permutation is an unbalanced Feistel network of 10 rounds over a 31-bit left half L
// (bits 62..32) and a 32-bit right half R (bits 31..0). Round i (0-based) maps (L, R) of widths
// (a, b) to (R, L xor F_i(R) mod 2^a), so the widths swap every round and, the rounds being
// even, end as (31, 32) again. The round function is SipHash-2-4 keyed with the 16-byte secret:
//   F_i(R) = SipHash-2-4(key, LE64(R | i << 32 | 0x66 << 56))   (0x66 = 'f', a domain byte)
// read as a little-endian 64-bit number (libsodium crypto_shorthash). decrypt runs the rounds
// backwards. Known answer: key 000102030405060708090a0b0c0d0e0f, id "k1": encrypt(0) =
// 7704551156889774887, encrypt(4194324487) = 3263842716310771651 = "k1_2TJVZN1P765Y3".
//
// Contract: immutable and thread-safe; the secret never leaves the object and is never
// printed. Failures are IllegalArgumentException with the C++ client's messages.
package dev.flurry.client;

/** One key of the opaque form: its id (1..8 of a-z, 0-9) and its 16-byte secret. */
public final class OpaqueKey {
  public static final int ROUNDS = 10;
  public static final int SECRET_SIZE = 16;
  public static final int KEY_ID_SIZE_MAX = 8;
  private static final int RIGHT_BITS = 32; // R: bits 31..0; L: bits 62..32 (31 bits)
  private static final long DOMAIN_BYTE = 0x66;

  private final String id;
  // The secret as SipHash's two little-endian key words.
  private final long k0;
  private final long k1;

  /**
   * @param id 1 to 8 chars of a-z and 0-9
   * @param secret 16 bytes, not all zero (copied)
   * @throws IllegalArgumentException naming what is wrong
   */
  public OpaqueKey(String id, byte[] secret) {
    if (!validKeyId(id)) {
      throw new IllegalArgumentException(
          "key id " + Forms.quoted(String.valueOf(id)) + " must be 1 to 8 chars of a-z and 0-9");
    }
    if (secret == null || secret.length != SECRET_SIZE) {
      throw new IllegalArgumentException("key " + id + ": the secret must be 16 bytes");
    }
    boolean zero = true;
    for (byte b : secret) zero &= b == 0;
    if (zero) {
      throw new IllegalArgumentException("key " + id
          + ": the secret is all zero; generate one with: head -c 16 /dev/urandom | xxd -p");
    }
    this.id = id;
    this.k0 = SipHash.littleEndian(secret, 0);
    this.k1 = SipHash.littleEndian(secret, 8);
  }

  public String id() {
    return id;
  }

  /** Whether {@code other} is this key's id, ignoring case. */
  public boolean hasId(String other) {
    return id.equalsIgnoreCase(other);
  }

  /** Names the key id only: a key printed in a log must not leak its secret. */
  @Override
  public String toString() {
    return "OpaqueKey(id=" + id + ")";
  }

  private long round(int round, long half) {
    final long message = half | (long) round << 32 | DOMAIN_BYTE << 56;
    final byte[] in = new byte[8];
    for (int i = 0; i < 8; ++i) in[i] = (byte) (message >>> (8 * i));
    return SipHash.hash(k0, k1, in, 0, 8);
  }

  // Width of the left half before round i: 31 before even rounds, 32 before odd ones.
  private static int leftBitsBefore(int round) {
    return round % 2 == 0 ? 63 - RIGHT_BITS : RIGHT_BITS;
  }

  private static long lowBits(long value, int bits) {
    return value & ((1L << bits) - 1);
  }

  /** The permutation: for x in 0..2^63-1, a value in 0..2^63-1; decrypt(encrypt(x)) == x. */
  public long encrypt(long x) {
    Forms.checkId(x);
    long left = x >>> RIGHT_BITS;
    long right = lowBits(x, RIGHT_BITS);
    for (int round = 0; round < ROUNDS; ++round) {
      final long mixed = lowBits(left ^ round(round, right), leftBitsBefore(round));
      left = right;
      right = mixed;
    }
    return left << RIGHT_BITS | right;
  }

  public long decrypt(long y) {
    Forms.checkId(y);
    long left = y >>> RIGHT_BITS;
    long right = lowBits(y, RIGHT_BITS);
    for (int round = ROUNDS - 1; round >= 0; --round) {
      final long before = lowBits(right ^ round(round, left), leftBitsBefore(round));
      right = left;
      left = before;
    }
    return left << RIGHT_BITS | right;
  }

  /** "ID_" and the 13 base32 chars of encrypt(id). */
  public String format(long id) {
    Forms.checkId(id);
    return this.id + "_" + Forms.base32(encrypt(id));
  }

  /**
   * The ID of an opaque text made with this key. Fails when it is not KEYID_ and 13 base32
   * chars, names another key id (ignoring case), or its number is malformed.
   */
  public long parse(String text) {
    final String keyId = keyIdOf(text);
    if (!hasId(keyId)) {
      throw new IllegalArgumentException(Forms.quoted(text) + " was made with key '" + keyId
          + "', not '" + id + "'");
    }
    final long value;
    try {
      value = Forms.parseBase32(text.substring(keyId.length() + 1));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("opaque ID " + e.getMessage());
    }
    return decrypt(value);
  }

  /**
   * The key id of an opaque text ("k1" of "k1_2TJVZN1P765Y3"), as written.
   *
   * @throws IllegalArgumentException when the text is not KEYID_ and 13 chars
   */
  public static String keyIdOf(String text) {
    if (!isOpaqueText(text)) {
      throw new IllegalArgumentException(Forms.quoted(text)
          + " is not an opaque ID (KEYID_ and 13 base32 chars, e.g. k1_2TJVZN1P765Y3)");
    }
    return text.substring(0, text.indexOf('_'));
  }

  static boolean isOpaqueText(String text) {
    final int separator = text.indexOf('_');
    if (separator <= 0 || separator > KEY_ID_SIZE_MAX
        || text.length() != separator + 1 + Forms.BASE32_SIZE) {
      return false;
    }
    for (int i = 0; i < separator; ++i) {
      final char c = text.charAt(i);
      if (!(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')) return false;
    }
    return true;
  }

  static boolean validKeyId(String id) {
    if (id == null || id.isEmpty() || id.length() > KEY_ID_SIZE_MAX) return false;
    for (int i = 0; i < id.length(); ++i) {
      final char c = id.charAt(i);
      if (!(c >= 'a' && c <= 'z' || c >= '0' && c <= '9')) return false;
    }
    return true;
  }
}
