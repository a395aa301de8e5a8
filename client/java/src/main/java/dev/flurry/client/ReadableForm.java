// client/java/.../ReadableForm.java — the readable form of an ID (client/forms.h ReadableForm):
// TIME TAG REST, no delimiters, every part fixed width for one layout:
//   TIME  the ID's instant in UTC, truncated to the layout's unit: YY MM DD HH mm ss and then
//         SSS (1 ms unit), SS (hundredths: 10 ms) or nothing (1 s). YY is two digits when the
//         whole layout (epoch to its last instant) lies in 2000..2099; otherwise the full year,
//         zero-padded to the digits of the layout's last year (at least 4).
//   TAG   0..4 chars of [A-Z0-9], given by the caller (a business tag such as "ORD").
//   REST  the bits below the time field (node, core, counter) as one decimal number,
//         zero-padded to the digits of its largest value (7 for the snowflake layout).
// For one tag, string order is numeric order. The time field is recovered as
// floor(instant / unit) - floor(epoch / unit), exact for any epoch.
//
// Contract: immutable and thread-safe once made; failures are IllegalArgumentException with
// the C++ client's messages.
package dev.flurry.client;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;

/** The readable form (TIME TAG REST) of one layout's IDs. */
public final class ReadableForm {
  public static final int TAG_SIZE_MAX = 4;

  /** A parsed readable text: the ID and its tag ("" when none). */
  public record Readable(long id, String tag) {}

  private final Layout layout;
  private final int yearDigits; // 2 (yy) or the full year's
  private final int fractionDigits; // 3, 2 or 0 for 1 ms, 10 ms, 1 s
  private final int restBits; // node + sequence bits
  private final int restDigits;

  private ReadableForm(Layout layout) {
    this.layout = layout;
    final int firstYear = Forms.yearOf(layout.epochMs);
    final int lastYear = Forms.yearOf(layout.endUnixMs());
    yearDigits = firstYear >= 2000 && lastYear <= 2099
        ? 2 : Math.max(4, Long.toString(lastYear).length());
    fractionDigits = layout.timeUnitMs == 1 ? 3 : layout.timeUnitMs == 10 ? 2 : 0;
    restBits = layout.nodeBits + layout.sequenceBits;
    restDigits = Long.toString((1L << restBits) - 1).length();
  }

  /**
   * The readable form of {@code layout}'s IDs.
   *
   * @throws IllegalArgumentException when the layout fails the layout rules (Layout.check)
   */
  public static ReadableForm of(Layout layout) {
    final String invalid = layout.check();
    if (invalid != null) throw new IllegalArgumentException("readable form: " + invalid);
    return new ReadableForm(layout);
  }

  public Layout layout() {
    return layout;
  }

  /** Chars of the form with a tag of {@code tagSize} chars. */
  public int size(int tagSize) {
    return timeDigits() + tagSize + restDigits;
  }

  /** Chars of TIME. */
  public int timeDigits() {
    return yearDigits + 10 + fractionDigits;
  }

  /**
   * The readable form of {@code id} with {@code tag} ("" for none).
   *
   * @throws IllegalArgumentException when the tag is not 0..4 chars of [A-Z0-9] or the ID does
   *     not fit the layout
   */
  public String format(long id, String tag) {
    Forms.checkFits(layout, id);
    checkTag(tag);
    final long unixMs = layout.decode(id).unixMs();
    final ZonedDateTime t = Instant.ofEpochMilli(unixMs).atZone(ZoneOffset.UTC);
    final StringBuilder out = new StringBuilder(size(tag.length()));
    put(out, yearDigits == 2 ? t.getYear() - 2000 : t.getYear(), yearDigits);
    put(out, t.getMonthValue(), 2);
    put(out, t.getDayOfMonth(), 2);
    put(out, t.getHour(), 2);
    put(out, t.getMinute(), 2);
    put(out, t.getSecond(), 2);
    // Truncated to the unit: 3 digits of ms, 2 of hundredths, or none.
    put(out, (unixMs % 1000) / pow10(3 - fractionDigits), fractionDigits);
    out.append(tag);
    put(out, id & ((1L << restBits) - 1), restDigits);
    return out.toString();
  }

  /**
   * The ID and tag of a readable text. Fails naming the first thing wrong: length, a non-digit,
   * a date field out of range, a tag char, a REST above the layout's bits, an instant outside
   * the layout.
   */
  public Readable parse(String text) {
    final int bare = size(0);
    if (text.length() < bare || text.length() > bare + TAG_SIZE_MAX) {
      throw new IllegalArgumentException(Forms.quoted(text) + " is not a readable ID of this"
          + " layout: it has " + text.length() + " chars, not " + bare + " to "
          + (bare + TAG_SIZE_MAX));
    }
    final int tagSize = text.length() - bare;
    final String tag = text.substring(timeDigits(), timeDigits() + tagSize);
    final String rest = text.substring(timeDigits() + tagSize);
    final long time;
    try {
      time = parseTime(text.substring(0, timeDigits()));
      checkTag(tag);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          Forms.quoted(text) + " is not a readable ID: " + e.getMessage());
    }
    final long restValue = Forms.readDigits(rest);
    if (restValue < 0 || (restValue >>> restBits) != 0) {
      throw new IllegalArgumentException(Forms.quoted(text) + " is not a readable ID: its last "
          + restDigits + " chars must be a number below 2^" + restBits);
    }
    return new Readable(time << restBits | restValue, tag);
  }

  // The time field of TIME digits (length already checked).
  private long parseTime(String digits) {
    final long[] fields = new long[7]; // year, month, day, hour, minute, second, fraction
    final int[] widths = {yearDigits, 2, 2, 2, 2, 2, fractionDigits};
    int at = 0;
    for (int i = 0; i < fields.length; ++i) {
      fields[i] = widths[i] == 0 ? 0 : Forms.readDigits(digits.substring(at, at + widths[i]));
      at += widths[i];
      if (fields[i] < 0) {
        throw new IllegalArgumentException(
            "its first " + timeDigits() + " chars (the time) must be digits");
      }
    }
    final long year = yearDigits == 2 ? 2000 + fields[0] : fields[0];
    long seconds;
    try {
      seconds = LocalDateTime.of((int) year, (int) fields[1], (int) fields[2], (int) fields[3],
          (int) fields[4], (int) fields[5]).toEpochSecond(ZoneOffset.UTC);
    } catch (DateTimeException e) {
      seconds = -1;
    }
    if (seconds < 0) {
      throw new IllegalArgumentException(
          "its time " + digits + " is not a real UTC date and time");
    }
    final long unit = layout.timeUnitMs;
    final long unixMs = seconds * 1000 + fields[6] * pow10(3 - fractionDigits);
    final long firstUnit = layout.epochMs / unit;
    if (unixMs / unit < firstUnit || unixMs / unit - firstUnit > layout.timeMax()) {
      throw new IllegalArgumentException("its time " + Forms.formatUnixMs(unixMs)
          + " is outside the layout (" + Forms.formatUnixMs(layout.epochMs) + " to "
          + Forms.formatUnixMs(layout.endUnixMs()) + ")");
    }
    return unixMs / unit - firstUnit;
  }

  private static void checkTag(String tag) {
    if (tag.length() > TAG_SIZE_MAX) {
      throw new IllegalArgumentException("tag " + Forms.quoted(tag) + " is longer than 4 chars");
    }
    for (int i = 0; i < tag.length(); ++i) {
      final char c = tag.charAt(i);
      if (!(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')) {
        throw new IllegalArgumentException("tag " + Forms.quoted(tag) + " may hold only A-Z and 0-9");
      }
    }
  }

  // `value` as exactly `width` digits, zero-padded (the value fits).
  private static void put(StringBuilder out, long value, int width) {
    final String digits = Long.toString(value);
    for (int i = digits.length(); i < width; ++i) out.append('0');
    out.append(digits, Math.max(0, digits.length() - width), digits.length());
  }

  private static long pow10(int exponent) {
    long value = 1;
    for (int i = 0; i < exponent; ++i) value *= 10;
    return value;
  }
}
