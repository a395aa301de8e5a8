// client/java/.../Forms.java — the text forms of a flurry ID (README "ID forms"; the exact
// definitions are client/forms.h, which this follows rule for rule): dec, hex, base32 and uuid
// here; readable in ReadableForm, opaque in OpaqueKey (keys from a KeyRing); and format /
// parse / parseAny over all six by IdForm.
//
// Contract: pure static functions, thread-safe. An ID is a long in 0..ID_MAX (bit 63 clear).
// Every failure is an IllegalArgumentException with one sentence saying what is wrong with the
// input (the C++ client's messages); nothing else is thrown for bad input.
//   dec      decimal, no padding: "4194324487". Parsing: 1..19 digits, below 2^63.
//   hex      "0x" + 16 lower-case hex digits. Parsing: 0x or 0X and 1..16 hex digits, any case.
//   base32   Crockford base32, 13 symbols, upper case, most significant first; string order is
//            numeric order. Parsing takes lower case and the aliases I, L = 1 and O = 0, and
//            refuses anything else (U included), another length, and values of 2^63 or more.
//   uuid     an RFC 9562 version-7 UUID carrying the whole ID: unix_ts_ms (48 bits: the ID's
//            instant, the layout's epoch + time x unit), ver 7, then 74 bits (rand_a, var 0b10,
//            rand_b) holding the ID in their low 63 bits, the 11 above it 0. java.util.UUID
//            reads it as version 7, variant 2. Decodes back exactly (the layout checks that
//            unix_ts_ms is the ID's own instant).
package dev.flurry.client;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.Locale;
import java.util.UUID;

/** The dec, hex, base32 and uuid forms of an ID, and any form by {@link IdForm}. */
public final class Forms {
  /** IDs are below 2^63: the sign bit stays 0. */
  public static final long ID_MAX = Long.MAX_VALUE;
  public static final int DEC_SIZE_MAX = 19;
  public static final int HEX_SIZE = 18;
  public static final int BASE32_SIZE = 13;
  public static final int UUID_SIZE = 36;

  // Crockford's alphabet: digits, then letters without I, L, O, U; in ASCII order.
  static final String BASE32_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  private static final char[] HEX_DIGITS = "0123456789abcdef".toCharArray();

  private Forms() {}

  // ---- dec, hex, base32 ----

  /** Decimal, no padding. */
  public static String dec(long id) {
    checkId(id);
    return Long.toString(id);
  }

  /** "0x" and 16 lower-case hex digits. */
  public static String hex(long id) {
    checkId(id);
    final char[] out = new char[HEX_SIZE];
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < 16; ++i) out[2 + i] = HEX_DIGITS[(int) (id >>> (60 - 4 * i)) & 0xf];
    return new String(out);
  }

  /** 13 Crockford base32 symbols of any 64-bit value (the opaque form writes its number so). */
  public static String base32(long value) {
    final char[] out = new char[BASE32_SIZE];
    for (int i = 0; i < BASE32_SIZE; ++i) {
      out[i] = BASE32_ALPHABET.charAt((int) (value >>> (5 * (BASE32_SIZE - 1 - i))) & 31);
    }
    return new String(out);
  }

  public static long parseDec(String text) {
    final long value = readDigits(text);
    if (value < 0) {
      throw new IllegalArgumentException(
          quoted(text) + " is not a decimal ID (1 to 19 digits, below 2^63)");
    }
    return value;
  }

  public static long parseHex(String text) {
    final boolean prefixed = text.length() > 2 && text.charAt(0) == '0'
        && (text.charAt(1) == 'x' || text.charAt(1) == 'X');
    long value = 0;
    boolean ok = prefixed && text.length() <= HEX_SIZE;
    for (int i = 2; ok && i < text.length(); ++i) {
      final int digit = hexValue(text.charAt(i));
      ok = digit >= 0;
      value = value << 4 | Math.max(digit, 0);
    }
    if (!ok || value < 0) {
      throw new IllegalArgumentException(quoted(text)
          + " is not a hexadecimal ID (0x and 1 to 16 hex digits, below 2^63)");
    }
    return value;
  }

  public static long parseBase32(String text) {
    if (text.length() != BASE32_SIZE) {
      throw new IllegalArgumentException(quoted(text) + " is not base32: it has "
          + text.length() + " chars, a base32 ID has 13");
    }
    long value = 0;
    for (int i = 0; i < text.length(); ++i) {
      final int symbol = base32Symbol(text.charAt(i));
      if (symbol < 0) {
        throw new IllegalArgumentException(quoted(text) + " is not base32: '" + text.charAt(i)
            + "' at position " + (i + 1) + " is not a Crockford symbol (0-9, A-Z but U)");
      }
      // 13 symbols carry 65 bits; an ID's 63 leave the first symbol 0..7.
      if (i == 0 && symbol > 7) {
        throw new IllegalArgumentException(quoted(text)
            + " is not base32 of an ID: it is 2^63 or more (the first symbol must be 0-7)");
      }
      value = value << 5 | symbol;
    }
    return value;
  }

  /** Fails unless {@code id} fits the layout's time + node + sequence bits. */
  public static void checkFits(Layout layout, long id) {
    final int idBits = layout.timeBits + layout.nodeBits + layout.sequenceBits;
    if (id < 0 || (idBits < 64 && (id >>> idBits) != 0)) {
      throw new IllegalArgumentException("ID " + Long.toUnsignedString(id)
          + " has bits above the layout's " + idBits + " bits; is it from another layout?");
    }
  }

  // ---- uuid ----

  private static final long UUID_VERSION = 7;
  private static final long UUID_VARIANT = 0b10;
  private static final long LOW_62 = (1L << 62) - 1;

  /**
   * The uuid form of {@code id} as a java.util.UUID (version 7, variant 2).
   *
   * @throws IllegalArgumentException if the ID does not fit the layout, or its instant is past
   *     what 48 bits of milliseconds hold (the year 10889)
   */
  public static UUID toUuid(Layout layout, long id) {
    checkId(id);
    checkFits(layout, id);
    final long unixMs = layout.decode(id).unixMs();
    if (unixMs >>> 48 != 0) {
      throw new IllegalArgumentException("ID " + id + " is of " + formatUnixMs(unixMs)
          + ", past what a UUID's 48 bits of milliseconds hold (the year 10889)");
    }
    // hi: unix_ts_ms (48) | ver (4) | rand_a (12); lo: var (2) | rand_b (62). rand_a:rand_b = id.
    final long hi = unixMs << 16 | UUID_VERSION << 12 | id >>> 62;
    final long lo = UUID_VARIANT << 62 | (id & LOW_62);
    return new UUID(hi, lo);
  }

  /** The uuid form's text: 8-4-4-4-12 lower-case hex digits. Fails as toUuid. */
  public static String uuid(Layout layout, long id) {
    return toUuid(layout, id).toString(); // UUID.toString writes lower-case 8-4-4-4-12
  }

  /**
   * The ID a uuid form's text carries; either case. Fails naming the first thing wrong:
   * length, a dash or hex digit out of place, the version or variant, the bits above the ID not
   * 0, an ID that does not fit the layout, or a unix_ts_ms that is not the ID's instant.
   */
  public static long parseUuid(Layout layout, String text) {
    if (text.length() != UUID_SIZE) {
      throw new IllegalArgumentException(quoted(text) + " is not a UUID: it has "
          + text.length() + " chars, a UUID has 36 (8-4-4-4-12 hex digits)");
    }
    long hi = 0;
    long lo = 0;
    int nibble = 0;
    for (int i = 0; i < UUID_SIZE; ++i) {
      if (i == 8 || i == 13 || i == 18 || i == 23) {
        if (text.charAt(i) != '-') {
          throw new IllegalArgumentException(
              quoted(text) + " is not a UUID: position " + (i + 1) + " must be '-'");
        }
        continue;
      }
      final int value = hexValue(text.charAt(i));
      if (value < 0) {
        throw new IllegalArgumentException(quoted(text) + " is not a UUID: '" + text.charAt(i)
            + "' at position " + (i + 1) + " is not a hex digit");
      }
      if (nibble < 16) {
        hi = hi << 4 | value;
      } else {
        lo = lo << 4 | value;
      }
      ++nibble;
    }
    return fromUuid(layout, new UUID(hi, lo), text);
  }

  /** The ID a uuid-form java.util.UUID carries. Fails as parseUuid. */
  public static long fromUuid(Layout layout, UUID uuid) {
    return fromUuid(layout, uuid, uuid.toString());
  }

  private static long fromUuid(Layout layout, UUID uuid, String text) {
    final long hi = uuid.getMostSignificantBits();
    final long lo = uuid.getLeastSignificantBits();
    if (((hi >>> 12) & 0xf) != UUID_VERSION) {
      throw new IllegalArgumentException(quoted(text) + " is not a flurry UUID: its version is "
          + ((hi >>> 12) & 0xf) + ", flurry writes version 7");
    }
    if ((lo >>> 62) != UUID_VARIANT) {
      throw new IllegalArgumentException(quoted(text)
          + " is not a flurry UUID: its variant is not RFC 9562's (10 in binary)");
    }
    if (((hi >>> 1) & 0x7ff) != 0) {
      throw new IllegalArgumentException(
          quoted(text) + " is not a flurry UUID: the 11 bits above the ID are not 0");
    }
    final long id = (hi & 1) << 62 | (lo & LOW_62);
    try {
      checkFits(layout, id);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          quoted(text) + " is not a UUID of this layout: " + e.getMessage());
    }
    final long unixMs = hi >>> 16;
    final long expectedMs = layout.decode(id).unixMs();
    if (unixMs != expectedMs) {
      throw new IllegalArgumentException(quoted(text) + " is not a UUID of this layout: its time"
          + " is " + formatUnixMs(unixMs) + ", the ID inside it is of " + formatUnixMs(expectedMs)
          + " (another epoch or layout?)");
    }
    return id;
  }

  // ---- any form ----

  /**
   * What a form needs beyond the ID: the layout's ReadableForm (readable; uuid uses its
   * layout), a tag (readable, formatting only; "" for none) and a key ring (opaque: its
   * current key encodes, decoding picks the key the text names). Null where not needed.
   */
  public record Options(ReadableForm readable, String tag, KeyRing keys) {
    public static final Options NONE = new Options(null, "", null);

    public Options {
      tag = tag == null ? "" : tag;
    }
  }

  /** A parsed text: its form, the ID, the tag of a readable form ("" otherwise), an opaque key id. */
  public record Parsed(IdForm form, long id, String tag, String keyId) {}

  private static void checkOptions(IdForm form, Options options) {
    if ((form == IdForm.READABLE || form == IdForm.UUID) && options.readable() == null) {
      throw new IllegalArgumentException("the " + form.wireName() + " form needs the ID layout");
    }
    if (form == IdForm.OPAQUE && options.keys() == null) {
      throw new IllegalArgumentException("the opaque form needs a key file");
    }
  }

  /** {@code form} of {@code id}. Fails as the form's own function, or when options lack what it needs. */
  public static String format(IdForm form, long id, Options options) {
    checkOptions(form, options);
    if (form != IdForm.READABLE && !options.tag().isEmpty()) {
      throw new IllegalArgumentException("a tag is part of the readable form only");
    }
    checkId(id);
    return switch (form) {
      case DEC -> dec(id);
      case HEX -> hex(id);
      case BASE32 -> base32(id);
      case READABLE -> options.readable().format(id, options.tag());
      case OPAQUE -> options.keys().current().format(id);
      case UUID -> uuid(options.readable().layout(), id);
    };
  }

  /** Text in {@code form}. Fails as the form's own parser, or when options lack what it needs. */
  public static Parsed parse(IdForm form, String text, Options options) {
    checkOptions(form, options);
    return switch (form) {
      case DEC -> new Parsed(form, parseDec(text), "", null);
      case HEX -> new Parsed(form, parseHex(text), "", null);
      case BASE32 -> new Parsed(form, parseBase32(text), "", null);
      case READABLE -> {
        final ReadableForm.Readable readable = options.readable().parse(text);
        yield new Parsed(form, readable.id(), readable.tag(), null);
      }
      case OPAQUE -> new Parsed(form, options.keys().decode(text), "",
          text.substring(0, text.indexOf('_')));
      case UUID -> new Parsed(form, parseUuid(options.readable().layout(), text), "", null);
    };
  }

  /**
   * Text in whichever form reads it: hex (0x...), dec, base32, readable and uuid (with
   * options.readable) or opaque (KEYID_..., with options.keys). Fails when no form reads it
   * (naming the likeliest form's reason) or when two do (a 13-digit number is both dec and
   * base32): then pass the form.
   */
  public static Parsed parseAny(String text, Options options) {
    IdForm likeliest = IdForm.DEC;
    if (text.length() > 2 && text.charAt(0) == '0'
        && (text.charAt(1) == 'x' || text.charAt(1) == 'X')) {
      likeliest = IdForm.HEX;
    }
    if (OpaqueKey.isOpaqueText(text)) likeliest = IdForm.OPAQUE;
    if (text.length() == BASE32_SIZE) likeliest = IdForm.BASE32;
    if (options.readable() != null && text.length() > DEC_SIZE_MAX) likeliest = IdForm.READABLE;
    if (options.readable() != null && text.length() == UUID_SIZE && text.indexOf('-') >= 0) {
      likeliest = IdForm.UUID;
    }
    Parsed found = null;
    for (IdForm form : new IdForm[] {IdForm.HEX, IdForm.DEC, IdForm.BASE32, IdForm.READABLE,
        IdForm.OPAQUE, IdForm.UUID}) {
      if ((form == IdForm.READABLE || form == IdForm.UUID) && options.readable() == null) continue;
      if (form == IdForm.OPAQUE && options.keys() == null) continue;
      final Parsed parsed;
      try {
        parsed = parse(form, text, options);
      } catch (IllegalArgumentException e) {
        continue;
      }
      if (found != null) {
        throw new IllegalArgumentException("'" + text + "' reads as " + found.form().wireName()
            + " (" + found.id() + ") and as " + form.wireName() + " (" + parsed.id()
            + "); say which form it is");
      }
      found = parsed;
    }
    if (found != null) return found;
    return parse(likeliest, text, options); // throws: no form read it
  }

  // ---- shared helpers ----

  static void checkId(long id) {
    if (id < 0) {
      throw new IllegalArgumentException("ID " + Long.toUnsignedString(id) + " is 2^63 or more");
    }
  }

  /** Quotes untrusted text for a message, cut to a readable length. */
  static String quoted(String text) {
    final int shownMax = 48;
    return text.length() > shownMax ? "'" + text.substring(0, shownMax) + "...'" : "'" + text + "'";
  }

  /** 1..19 decimal digits and nothing else: the value, or -1 (also for 2^63 or more). */
  static long readDigits(String text) {
    if (text.isEmpty() || text.length() > DEC_SIZE_MAX) return -1;
    for (int i = 0; i < text.length(); ++i) {
      final char c = text.charAt(i);
      if (c < '0' || c > '9') return -1;
    }
    final long value = Long.parseUnsignedLong(text); // 19 digits fit 64 bits
    return value < 0 ? -1 : value;
  }

  static int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // The value of a Crockford symbol, with lower case and the aliases I, L -> 1 and O -> 0; -1
  // for anything else.
  private static int base32Symbol(char c) {
    if (c >= 'a' && c <= 'z') c = (char) (c - 'a' + 'A');
    if (c == 'I' || c == 'L') c = '1';
    if (c == 'O') c = '0';
    return BASE32_ALPHABET.indexOf(c); // U is not in it
  }

  /** Unix ms as the C++ proto::format_unix_ms writes it: 2025-01-01T00:00:00.000Z. */
  static String formatUnixMs(long unixMs) {
    final ZonedDateTime t = Instant.ofEpochMilli(unixMs).atZone(ZoneOffset.UTC);
    return String.format(Locale.ROOT, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.getYear(),
        t.getMonthValue(), t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond(),
        unixMs % 1000);
  }

  /** The UTC year of an instant in Unix ms. */
  static int yearOf(long unixMs) {
    return Instant.ofEpochMilli(unixMs).atZone(ZoneOffset.UTC).getYear();
  }
}
