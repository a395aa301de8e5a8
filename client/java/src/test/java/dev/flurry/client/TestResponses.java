// client/java/.../TestResponses.java — test-only: the server side of the wire format, to build
// answers for the fake server (BehaviourTest) and to re-encode the response vectors
// (ProtocolVectorsTest) byte for byte. The client itself never encodes a response.
package dev.flurry.client;

import java.nio.ByteBuffer;
import java.util.List;

final class TestResponses {
  private TestResponses() {}

  /** A response: header, then the ranges, or the INFO body when info is not null. */
  static byte[] encode(int opcode, int status, int node, long requestId, long detail,
      List<Wire.Range> ranges, Wire.Info info) {
    final int body = info != null ? Wire.INFO_BODY_SIZE : ranges.size() * Wire.RANGE_SIZE;
    final ByteBuffer out = ByteBuffer.allocate(Wire.RESPONSE_HEADER_SIZE + body);
    out.putShort((short) Wire.MAGIC);
    out.put((byte) Wire.VERSION);
    out.put((byte) (opcode | Wire.OPCODE_RESPONSE_BIT));
    out.put((byte) status);
    out.put((byte) ranges.size());
    out.putShort((short) node);
    out.putLong(requestId);
    out.putInt((int) detail);
    for (Wire.Range range : ranges) {
      out.putLong(range.first());
      out.putInt((int) range.count());
    }
    if (info != null) {
      out.putLong(info.epochMs());
      out.putShort((short) info.timeUnitMs());
      out.put((byte) info.timeBits());
      out.put((byte) info.nodeBits());
      out.put((byte) info.sequenceBits());
      out.put((byte) info.coreBits());
      out.put((byte) info.coreFrom());
      out.put((byte) info.workers());
    }
    return out.array();
  }

  /** A bare header answer (RETRY, FENCED, BAD_REQUEST, UNAUTHORIZED, PING OK). */
  static byte[] header(int opcode, Wire.Status status, long requestId, long detail) {
    return encode(opcode, status.ordinal(), 5, requestId, detail, List.of(), null);
  }

  /**
   * The server's side of PROTOCOL.md "Authentication": the answer followed by its MAC over
   * the answer's bytes and then the request's MAC (proto::sign_answer).
   */
  static byte[] signed(byte[] answer, long requestMac, Key key) {
    final byte[] signed = java.util.Arrays.copyOf(answer, answer.length + Auth.MAC_SIZE);
    final ByteBuffer bytes = ByteBuffer.wrap(signed);
    bytes.putLong(answer.length, requestMac); // the MAC input goes on with the request's MAC
    bytes.putLong(answer.length, Auth.mac(key, signed, 0, signed.length));
    return signed;
  }

  /** An OK GET_IDS answer. */
  static byte[] ids(long requestId, List<Wire.Range> ranges) {
    return encode(Wire.Opcode.GET_IDS.code, 0, 5, requestId, 0, ranges, null);
  }
}
