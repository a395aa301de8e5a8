// client/java/.../Layout.java — the bit layout of a flurry ID (proto/PROTOCOL.md "The ID"):
// `0 | time | node field | sequence field`, with core bits carved from the top of the
// sequence (coreFrom SEQUENCE, the default) or the bottom of the node field (NODE).
//
// Contract: immutable. decode() and compose() are exact inverses for an ID that fits the
// layout. A layout from a server's INFO is not trusted: check() it (as `flurry decode
// --server` does, with "now" at the epoch) before decoding with it.
package dev.flurry.client;

import java.time.Instant;

/** An ID layout: widths, core bits, epoch and time unit. */
public final class Layout {
  /** 2024-01-01T00:00:00Z in Unix milliseconds, the default epoch. */
  public static final long DEFAULT_EPOCH_MS = 1_704_067_200_000L;
  /** A layout must cover at least 30 years (30 × 365.25 days) from its epoch. */
  public static final long TIME_RANGE_MIN_MS = 30L * 36_525L * 86_400_000L / 100L;

  /** Where the per-core bits come from. */
  public enum CoreFrom {
    SEQUENCE,
    NODE
  }

  /** The parts of one ID. node is the node id (never the raw node field). */
  public record Decoded(long time, long unixMs, int node, int core, int counter) {
    /** unixMs as an ISO-8601 UTC instant, e.g. 2025-01-01T00:00:00.000Z. */
    public String utc() {
      return java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'")
          .withZone(java.time.ZoneOffset.UTC)
          .format(Instant.ofEpochMilli(unixMs));
    }
  }

  public final int timeBits;
  public final int nodeBits;
  public final int sequenceBits;
  public final int coreBits;
  public final CoreFrom coreFrom;
  public final long epochMs;
  public final int timeUnitMs;

  public Layout(int timeBits, int nodeBits, int sequenceBits, int coreBits, CoreFrom coreFrom,
      long epochMs, int timeUnitMs) {
    this.timeBits = timeBits;
    this.nodeBits = nodeBits;
    this.sequenceBits = sequenceBits;
    this.coreBits = coreBits;
    this.coreFrom = coreFrom;
    this.epochMs = epochMs;
    this.timeUnitMs = timeUnitMs;
  }

  /** 41 time bits of 1 ms, 10 node bits, 12 sequence bits, default epoch: Twitter-compatible. */
  public static Layout snowflake() {
    return new Layout(41, 10, 12, 0, CoreFrom.SEQUENCE, DEFAULT_EPOCH_MS, 1);
  }

  /** 37 time bits of 10 ms, 5 node bits, 11 sequence bits: every ID below 2^53. */
  public static Layout jsSafe() {
    return new Layout(37, 5, 11, 0, CoreFrom.SEQUENCE, DEFAULT_EPOCH_MS, 10);
  }

  /** The layout an INFO answer describes; not validated (see check()). */
  public static Layout fromInfo(Wire.Info info) {
    return new Layout(info.timeBits(), info.nodeBits(), info.sequenceBits(), info.coreBits(),
        info.coreFrom() == 1 ? CoreFrom.NODE : CoreFrom.SEQUENCE, info.epochMs(),
        info.timeUnitMs());
  }

  /** Bits of the sequence field left for the counter. */
  public int counterBits() {
    return coreFrom == CoreFrom.SEQUENCE ? sequenceBits - coreBits : sequenceBits;
  }

  /** IDs one core may issue in one time unit: the most one range holds. */
  public long counterCapacity() {
    return 1L << counterBits();
  }

  private static long mask(int bits) {
    return (1L << bits) - 1;
  }

  public Decoded decode(long id) {
    final long sequenceField = id & mask(sequenceBits);
    final long nodeField = (id >>> sequenceBits) & mask(nodeBits);
    final long time = (id >>> (nodeBits + sequenceBits)) & mask(timeBits);
    final long unixMs = epochMs + time * timeUnitMs;
    if (coreFrom == CoreFrom.SEQUENCE) {
      return new Decoded(time, unixMs, (int) nodeField,
          (int) ((sequenceField >>> counterBits()) & mask(coreBits)),
          (int) (sequenceField & mask(counterBits())));
    }
    return new Decoded(time, unixMs, (int) (nodeField >>> coreBits),
        (int) (nodeField & mask(coreBits)), (int) sequenceField);
  }

  public long compose(long time, int node, int core, int counter) {
    long nodeField = node;
    long sequenceField = counter;
    if (coreFrom == CoreFrom.SEQUENCE) {
      sequenceField = ((long) core << counterBits()) | counter;
    } else {
      nodeField = ((long) node << coreBits) | core;
    }
    return (time << (nodeBits + sequenceBits)) | (nodeField << sequenceBits) | sequenceField;
  }

  /**
   * The checks flurryd makes at start (proto::validate) with the clock placed at the epoch, so
   * only what matters for decoding is checked. Returns null when usable, else why not.
   */
  public String check() {
    final int total = timeBits + nodeBits + sequenceBits;
    if (timeBits < 1 || timeBits > 50 || nodeBits < 0 || nodeBits > 16 || sequenceBits < 1
        || sequenceBits > 31) {
      return "layout widths must be time 1..50, node 0..16, sequence 1..31 bits";
    }
    if (total > Wire.ID_BITS_MAX) {
      return "layout widths sum to " + total + " bits; at most 63 keep IDs positive";
    }
    if (timeUnitMs != 1 && timeUnitMs != 10 && timeUnitMs != 1000) {
      return "time unit " + timeUnitMs + " ms is not allowed; use 1, 10 or 1000";
    }
    final int coreRoom = coreFrom == CoreFrom.SEQUENCE ? sequenceBits - 1 : nodeBits;
    if (coreBits < 0 || coreBits > coreRoom) {
      return coreBits + " core bits do not fit the " + coreFrom.name().toLowerCase(
          java.util.Locale.ROOT) + " field";
    }
    if ((mask(timeBits) + 1) * timeUnitMs < TIME_RANGE_MIN_MS) {
      return "a " + timeBits + "-bit time field of " + timeUnitMs
          + " ms units covers less than 30 years";
    }
    return null;
  }

  /** The largest time field value: 2^timeBits - 1. */
  public long timeMax() {
    return mask(timeBits);
  }

  /** The layout's last instant in Unix ms: its epoch + (timeMax + 1) units - 1 ms. */
  public long endUnixMs() {
    return epochMs + (timeMax() + 1) * timeUnitMs - 1;
  }

  /** Whether {@code id} has no bit above this layout's time + node + sequence bits. */
  public boolean fits(long id) {
    return (id >>> (timeBits + nodeBits + sequenceBits)) == 0;
  }

  @Override
  public String toString() {
    return timeBits + "/" + nodeBits + "/" + sequenceBits + " core_bits=" + coreBits
        + " core_from=" + coreFrom.name().toLowerCase(java.util.Locale.ROOT) + " epoch_ms="
        + epochMs + " time_unit_ms=" + timeUnitMs;
  }
}
