// client/java/.../Wire.java — flurry wire format v1 (proto/PROTOCOL.md) for Java: request
// encoding, response decoding with every rule of "Response decoding" in order, and the
// request sizing rule of "Anti-amplification, and how to ask for large batches".
//
// Contract: big-endian throughout, all in this file; every integer on the wire is unsigned
// (u32 values are held in a long, u16 and u8 in an int). decodeResponse never throws on bad
// input and never reads past `length`: it names the first rule the datagram fails.
package dev.flurry.client;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/** Constants, encoder and decoder of wire format v1. Pure: no I/O, thread-safe. */
public final class Wire {
  public static final int MAGIC = 0x464c; // "FL"
  public static final int VERSION = 1;
  public static final int REQUEST_HEADER_SIZE = 20;
  public static final int RESPONSE_HEADER_SIZE = 20;
  public static final int RANGE_SIZE = 12;
  public static final int INFO_BODY_SIZE = 16;
  /** The largest UDP payload that fits a 1500-byte MTU without fragmentation. */
  public static final int DATAGRAM_SIZE_MAX = 1472;
  /** A response is never more than this many times the request's size. */
  public static final int AMPLIFICATION_MAX = 3;
  /** The most IDs one GET_IDS request may ask for (2^20). */
  public static final long COUNT_MAX = 1L << 20;
  public static final int OPCODE_RESPONSE_BIT = 0x80;
  public static final int FLAG_AUTH = 0x0001;
  /** IDs keep bit 63 clear: every ID is below 2^63. */
  public static final int ID_BITS_MAX = 63;
  /** The longest sequence name GET_SEQ carries. */
  public static final int SEQ_NAME_SIZE_MAX = 32;
  /** A NOT_OWNER answer's detail when no node owns the sequence now (else the owner's id). */
  public static final long NOT_OWNER_UNKNOWN = 0xffffffffL;
  /** A FENCED answer's detail when its operator drains the server before a planned stop. */
  public static final long FENCED_DRAINING = 1;
  /** The request error a signed GET_IDS / GET_SEQ gets when signed for another node id. */
  public static final long WRONG_SERVER = 42;
  /** A signed request's `server` before the client has heard the server's node id. */
  public static final long ANY_SERVER = 0xffffffffL;

  private Wire() {}

  /** The v1 operations; {@code code} is the opcode byte of the request. */
  public enum Opcode {
    GET_IDS(1),
    PING(2),
    INFO(3),
    /** Numbers of a named sequence (FlurryClient.getSeq). */
    GET_SEQ(4);

    public final int code;

    Opcode(int code) {
      this.code = code;
    }
  }

  /** v1 statuses; the ordinal is the status byte. */
  public enum Status {
    OK,
    RETRY,
    BAD_REQUEST,
    UNAUTHORIZED,
    FENCED,
    /** GET_SEQ: no sequence of that name. */
    UNKNOWN_SEQUENCE,
    /** GET_SEQ: another node serves this monotonic sequence; detail is its node id. */
    NOT_OWNER,
    /**
     * GET_IDS: the layout's time field has run out; GET_SEQ: the sequence reached 2^63.
     * Asking again, here or elsewhere, is useless.
     */
    EXHAUSTED;

    static Status of(int value) {
      return values()[value];
    }
  }

  /** What decodeResponse found wrong, in the order PROTOCOL.md checks it (rules 1..12). */
  public enum ResponseError {
    OK,
    TOO_SHORT,
    BAD_MAGIC,
    TOO_LONG,
    BAD_VERSION,
    NOT_RESPONSE,
    BAD_STATUS,
    BAD_OPCODE,
    STATUS_UNEXPECTED,
    RANGES_UNEXPECTED,
    RANGES_MISSING,
    BAD_LENGTH,
    BAD_RANGE;

    /** The name PROTOCOL.md uses, e.g. "bad_range". */
    public String wireName() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** The server's reasons for BAD_REQUEST / UNAUTHORIZED ("Request errors"), by number. */
  public static String requestErrorName(long number) {
    return switch ((int) Math.min(number, 1000)) {
      case 0 -> "ok";
      case 1 -> "too_short";
      case 2 -> "bad_magic";
      case 3 -> "too_long";
      case 4 -> "is_response";
      case 16 -> "bad_version";
      case 17 -> "bad_opcode";
      case 18 -> "bad_flags";
      case 19 -> "reserved_nonzero";
      case 20 -> "count_zero";
      case 21 -> "count_too_large";
      case 22 -> "trailing_bytes";
      case 23 -> "count_unexpected";
      case 24 -> "name_missing";
      case 25 -> "name_too_long";
      case 26 -> "name_truncated";
      case 27 -> "name_bad";
      case 32 -> "auth_unsupported";
      case 33 -> "trailer_short";
      case 34 -> "unknown_key";
      case 35 -> "stale_timestamp";
      case 36 -> "bad_mac";
      case 37 -> "replay";
      case 38 -> "replay_full";
      case 39 -> "not_permitted";
      case 40 -> "rate_limited";
      case 41 -> "auth_required";
      case 42 -> "wrong_server";
      default -> "unknown";
    };
  }

  /** first, first + 1, ..., first + count - 1: consecutive IDs. count is 1..2^32 - 1. */
  public record Range(long first, long count) {}

  /** The 16-byte INFO body: everything needed to decode the server's IDs (see Layout). */
  public record Info(
      long epochMs,
      int timeUnitMs,
      int timeBits,
      int nodeBits,
      int sequenceBits,
      int coreBits,
      int coreFrom,
      int workers) {}

  /**
   * A decoded response. The header fields are read at their offsets whenever the datagram has
   * 20 bytes, whatever {@code error} says; {@code ranges} and {@code info} only when error is OK.
   * {@code opcode} is the opcode byte without the response bit; {@code status} the raw byte.
   */
  public record Response(
      ResponseError error,
      int opcode,
      int status,
      int rangeCount,
      int node,
      long requestId,
      long detail,
      List<Range> ranges,
      Info info) {

    /** The sum of the ranges' counts (0 unless an OK GET_IDS answer). */
    public long idCount() {
      long ids = 0;
      for (Range range : ranges) ids += range.count();
      return ids;
    }
  }

  /**
   * Writes a request of max(20, paddedSize) bytes (zero padding) into {@code out}; returns the
   * size written. Takes the raw header values, so it also writes requests a server rejects.
   *
   * @throws IllegalArgumentException if paddedSize exceeds DATAGRAM_SIZE_MAX or out is short
   */
  public static int encodeRequest(
      int opcodeByte, int flags, long count, long requestId, int paddedSize, byte[] out) {
    final int size = Math.max(REQUEST_HEADER_SIZE, paddedSize);
    if (size > DATAGRAM_SIZE_MAX || out.length < size) {
      throw new IllegalArgumentException("request size " + size + " does not fit");
    }
    ByteBuffer buffer = ByteBuffer.wrap(out);
    buffer.putShort((short) MAGIC);
    buffer.put((byte) VERSION);
    buffer.put((byte) opcodeByte);
    buffer.putShort((short) flags);
    buffer.putShort((short) 0); // reserved
    buffer.putInt((int) count);
    buffer.putLong(requestId);
    java.util.Arrays.fill(out, REQUEST_HEADER_SIZE, size, (byte) 0);
    return size;
  }

  /** Whether GET_SEQ may carry this name: 1..SEQ_NAME_SIZE_MAX of A-Z a-z 0-9 _ . - : */
  public static boolean validSeqName(String name) {
    if (name == null || name.isEmpty() || name.length() > SEQ_NAME_SIZE_MAX) return false;
    for (int i = 0; i < name.length(); ++i) {
      final char c = name.charAt(i);
      final boolean ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
          || c == '_' || c == '.' || c == '-' || c == ':';
      if (!ok) return false;
    }
    return true;
  }

  /**
   * Writes a GET_SEQ request: the header, the name's length byte and ASCII bytes, zero padding
   * up to paddedSize. Returns the size written.
   *
   * @throws IllegalArgumentException if the request does not fit
   */
  public static int encodeSeqRequest(
      int flags, long count, long requestId, String name, int paddedSize, byte[] out) {
    final byte[] nameBytes = name.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    final int size = Math.max(REQUEST_HEADER_SIZE + 1 + nameBytes.length, paddedSize);
    encodeRequest(Opcode.GET_SEQ.code, flags, count, requestId, size, out);
    out[REQUEST_HEADER_SIZE] = (byte) nameBytes.length;
    System.arraycopy(nameBytes, 0, out, REQUEST_HEADER_SIZE + 1, nameBytes.length);
    return size;
  }

  /** Checks a datagram by PROTOCOL.md "Response decoding" rules 1..12, stopping at the first failure. */
  public static Response decodeResponse(byte[] datagram, int length) {
    if (length < RESPONSE_HEADER_SIZE) {
      return new Response(ResponseError.TOO_SHORT, 0, 0, 0, 0, 0, 0, List.of(), null);
    }
    ByteBuffer buffer = ByteBuffer.wrap(datagram, 0, length);
    final int opcodeByte = datagram[3] & 0xff;
    final int opcode = opcodeByte & ~OPCODE_RESPONSE_BIT;
    final int status = datagram[4] & 0xff;
    final int rangeCount = datagram[5] & 0xff;
    final int node = buffer.getShort(6) & 0xffff;
    final long requestId = buffer.getLong(8);
    final long detail = buffer.getInt(16) & 0xffffffffL;
    ResponseError error = checkHeader(buffer, length, opcodeByte, status, rangeCount);
    List<Range> ranges = List.of();
    Info info = null;
    if (error == ResponseError.OK) {
      final boolean isInfo = opcode == Opcode.INFO.code && status == Status.OK.ordinal();
      final int expected = isInfo ? INFO_BODY_SIZE : rangeCount * RANGE_SIZE;
      if (length - RESPONSE_HEADER_SIZE != expected) {
        error = ResponseError.BAD_LENGTH;
      } else if (isInfo) {
        info = readInfo(buffer);
      } else {
        ranges = readRanges(buffer, rangeCount);
        if (ranges == null) {
          error = ResponseError.BAD_RANGE;
          ranges = List.of();
        }
      }
    }
    return new Response(error, opcode, status, rangeCount, node, requestId, detail, ranges, info);
  }

  // Rules 2..10: what the header alone says (rule 1 is done by the caller).
  private static ResponseError checkHeader(
      ByteBuffer buffer, int length, int opcodeByte, int status, int rangeCount) {
    if ((buffer.getShort(0) & 0xffff) != MAGIC) return ResponseError.BAD_MAGIC;
    if (length > DATAGRAM_SIZE_MAX) return ResponseError.TOO_LONG;
    if ((buffer.get(2) & 0xff) != VERSION) return ResponseError.BAD_VERSION;
    if ((opcodeByte & OPCODE_RESPONSE_BIT) == 0) return ResponseError.NOT_RESPONSE;
    if (status > Status.EXHAUSTED.ordinal()) return ResponseError.BAD_STATUS;
    final int opcode = opcodeByte & ~OPCODE_RESPONSE_BIT;
    final boolean knownOpcode = opcode >= Opcode.GET_IDS.code && opcode <= Opcode.GET_SEQ.code;
    // An unknown opcode comes back only to say BAD_REQUEST (bad_opcode or bad_version).
    if (!knownOpcode && status != Status.BAD_REQUEST.ordinal()) return ResponseError.BAD_OPCODE;
    final boolean getSeq = opcode == Opcode.GET_SEQ.code;
    final boolean issues = opcode == Opcode.GET_IDS.code || getSeq;
    if (!issues && (status == Status.RETRY.ordinal() || status == Status.FENCED.ordinal()
        || status == Status.EXHAUSTED.ordinal())) {
      return ResponseError.STATUS_UNEXPECTED;
    }
    if (!getSeq
        && (status == Status.UNKNOWN_SEQUENCE.ordinal() || status == Status.NOT_OWNER.ordinal())) {
      return ResponseError.STATUS_UNEXPECTED;
    }
    final boolean carriesRanges = issues && status == Status.OK.ordinal();
    if (!carriesRanges && rangeCount != 0) return ResponseError.RANGES_UNEXPECTED;
    if (carriesRanges && rangeCount == 0) return ResponseError.RANGES_MISSING;
    return ResponseError.OK;
  }

  // Rule 12: nonempty, below 2^63, increasing without overlap. Null when one is not.
  private static List<Range> readRanges(ByteBuffer buffer, int rangeCount) {
    List<Range> ranges = new ArrayList<>(rangeCount);
    long nextFree = 0; // unsigned: every ID below it is in an earlier range (2^63 at most)
    for (int i = 0; i < rangeCount; ++i) {
      final int offset = RESPONSE_HEADER_SIZE + i * RANGE_SIZE;
      final long first = buffer.getLong(offset);
      final long count = buffer.getInt(offset + 8) & 0xffffffffL;
      // first < 0 is bit 63 set; first > 2^63 - count is first + count > 2^63.
      if (count == 0 || first < 0 || first > Long.MIN_VALUE - count
          || Long.compareUnsigned(first, nextFree) < 0) {
        return null;
      }
      nextFree = first + count;
      ranges.add(new Range(first, count));
    }
    return ranges;
  }

  private static Info readInfo(ByteBuffer buffer) {
    final int at = RESPONSE_HEADER_SIZE;
    return new Info(
        buffer.getLong(at),
        buffer.getShort(at + 8) & 0xffff,
        buffer.get(at + 10) & 0xff,
        buffer.get(at + 11) & 0xff,
        buffer.get(at + 12) & 0xff,
        buffer.get(at + 13) & 0xff,
        buffer.get(at + 14) & 0xff,
        buffer.get(at + 15) & 0xff);
  }

  /**
   * Rules 14 and 15, for an answer that passed rules 1..12 and echoes the request's id: the
   * same opcode, and never more IDs than asked.
   */
  static boolean consistent(Response response, int opcode, long count) {
    return response.opcode() == opcode && response.idCount() <= count;
  }

  // ---- sizing: how many ranges a request of s bytes buys, and the padding that buys r ----

  /** min(3 × requestSize, 1472): the largest answer a request of this size may get. */
  public static int responseSizeMax(int requestSize) {
    return Math.min(AMPLIFICATION_MAX * requestSize, DATAGRAM_SIZE_MAX);
  }

  /** How many ranges an answer to a request of {@code requestSize} bytes may carry. */
  public static int rangesMax(int requestSize) {
    final int room = responseSizeMax(requestSize);
    final int ranges = room <= RESPONSE_HEADER_SIZE ? 0 : (room - RESPONSE_HEADER_SIZE) / RANGE_SIZE;
    return Math.min(ranges, 255);
  }

  /** The request size (20 or more) whose answer may carry {@code ranges} ranges. */
  public static int requestSizeForRanges(int ranges) {
    final int response = RESPONSE_HEADER_SIZE + ranges * RANGE_SIZE;
    return Math.max(REQUEST_HEADER_SIZE, (response + AMPLIFICATION_MAX - 1) / AMPLIFICATION_MAX);
  }

  /**
   * ceil(count / idsPerRange) + 1 ranges (the first may start mid-unit), at most what the
   * largest datagram carries (121).
   */
  public static int rangesForIds(long count, long idsPerRange) {
    final long perRange = Math.max(1, idsPerRange);
    final long ranges = (count + perRange - 1) / perRange + 1;
    return (int) Math.min(ranges, rangesMax(DATAGRAM_SIZE_MAX));
  }

  /** The padded size of a request for {@code count} IDs at {@code idsPerRange} per range. */
  public static int requestSizeForIds(long count, long idsPerRange) {
    return requestSizeForRanges(rangesForIds(count, idsPerRange));
  }
}
