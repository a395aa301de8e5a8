// client/java/.../Auth.java — signing of requests and checking of signed answers
// (PROTOCOL.md "Authentication"; the C++ proto/auth.h). A signed request ends with the 24-byte
// trailer: key id (u32), server (u32: the node id of the server the request is for, or
// Wire.ANY_SERVER), timestamp (u64, microseconds since the Unix epoch, the client's clock),
// MAC (8 bytes) = SipHash-2-4 keyed with the key's secret over every byte before the MAC. A signed answer ends with 8 MAC bytes = SipHash-2-4 over (the answer's bytes before the
// MAC, then the request's 8 MAC bytes).
//
// Contract: MACs are held as the 8 wire bytes read big-endian (as the vectors print them).
// Nothing reads outside [0, size) of its buffer; verifyAnswer never throws on bad input.
package dev.flurry.client;

import java.nio.ByteBuffer;

final class Auth {
  static final int TRAILER_SIZE = 24;
  static final int MAC_SIZE = 8;
  /** The smallest signed request: header and trailer. */
  static final int SIGNED_REQUEST_SIZE_MIN = Wire.REQUEST_HEADER_SIZE + TRAILER_SIZE;
  /** The smallest signed answer: header and answer MAC. */
  static final int SIGNED_ANSWER_SIZE_MIN = Wire.RESPONSE_HEADER_SIZE + MAC_SIZE;

  private Auth() {}

  /** The MAC of {@code data[offset, offset + length)}, as its 8 wire bytes read big-endian. */
  static long mac(Key key, byte[] data, int offset, int length) {
    return Long.reverseBytes(SipHash.hash(key.k0, key.k1, data, offset, length));
  }

  /**
   * Writes a signed request into {@code out}: the header with FLAG_AUTH, GET_SEQ's name when
   * {@code seqName} is not null, zero padding, the trailer. Its size is {@code size}, grown
   * where the body and the trailer need more (the C++ encode_signed_request). Returns the
   * size; the request's MAC is then {@link #storedMac}(out, size). {@code server} is the node
   * id the request is for, or Wire.ANY_SERVER.
   *
   * @throws IllegalArgumentException if it does not fit a datagram
   */
  static int encodeSignedRequest(int opcode, long count, long requestId, String seqName,
      int size, Key key, long server, long timestampUs, byte[] out) {
    final int body = seqName == null ? 0 : 1 + seqName.length();
    final int signedSize = Math.max(
        Math.max(size, SIGNED_REQUEST_SIZE_MIN), Wire.REQUEST_HEADER_SIZE + body + TRAILER_SIZE);
    if (seqName != null) {
      Wire.encodeSeqRequest(Wire.FLAG_AUTH, count, requestId, seqName, signedSize, out);
    } else {
      Wire.encodeRequest(opcode, Wire.FLAG_AUTH, count, requestId, signedSize, out);
    }
    final ByteBuffer trailer = ByteBuffer.wrap(out);
    final int at = signedSize - TRAILER_SIZE;
    trailer.putInt(at, (int) key.id());
    trailer.putInt(at + 4, (int) server);
    trailer.putLong(at + 8, timestampUs);
    trailer.putLong(at + 16, mac(key, out, 0, signedSize - MAC_SIZE));
    return signedSize;
  }

  /** The last 8 bytes of {@code datagram[0, size)}: a signed request's or answer's MAC. */
  static long storedMac(byte[] datagram, int size) {
    return ByteBuffer.wrap(datagram).getLong(size - MAC_SIZE);
  }

  /**
   * Whether {@code answer[0, length)} is 28..1472 bytes and ends with the right MAC for the
   * request whose MAC was {@code requestMac}. The caller then decodes the first length - 8
   * bytes. The MAC input is the answer's bytes before its MAC followed by the request's MAC,
   * so the request's MAC is put where the answer's was for the computation, then put back.
   */
  static boolean verifyAnswer(byte[] answer, int length, long requestMac, Key key) {
    if (length < SIGNED_ANSWER_SIZE_MIN || length > Wire.DATAGRAM_SIZE_MAX) return false;
    final ByteBuffer bytes = ByteBuffer.wrap(answer);
    final int at = length - MAC_SIZE;
    final long answerMac = bytes.getLong(at);
    bytes.putLong(at, requestMac);
    final long expected = mac(key, answer, 0, length);
    bytes.putLong(at, answerMac);
    // One comparison of the whole word: no early exit on the first differing byte.
    return (expected ^ answerMac) == 0;
  }

}
