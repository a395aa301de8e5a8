// client/java/.../KeyRing.java — the key file of the opaque form (client/form_keys.h): load it,
// pick the key that encodes, find the key an opaque text names.
//
// A key file is TOML, mode 0600 or stricter (a file that group or others may read or write is
// refused: a leaked key reveals every ID's time and volume):
//
//   current = "k2"        # the key that encodes new IDs; may be left out when there is one key
//   [[key]]
//   id = "k1"             # 1..8 chars of a-z and 0-9; the opaque text starts with it
//   secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
//   [[key]]
//   id = "k2"
//   secret = "..."
//
// Every key decodes, only `current` encodes. This reader takes the small subset of TOML such a
// file needs, by hand (the JDK has no TOML reader and the client depends on nothing else):
// comments, blank lines, `name = value` lines and `[[key]]` headers, with values read as
// quoted strings ("..." without escapes, or '...'); any other value reads as "not a string"
// and is refused where a string is needed. Everything else is refused naming the line. The
// checks and messages after reading are the C++ KeyRing::parse's, in its order. Limits: the
// file at most 64 KiB, at most 64 keys, ids unique. Immutable; safe to share between threads.
package dev.flurry.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The keys of an opaque-form key file: {@link #current()} encodes, every key decodes. */
public final class KeyRing {
  public static final long FILE_SIZE_MAX = 64 * 1024;
  public static final int KEY_COUNT_MAX = 64;

  // A value that is not a quoted string (a number, a boolean, an array...).
  private static final Object NOT_A_STRING = new Object();
  private static final Pattern KEY_HEADER = Pattern.compile("\\[\\[\\s*([A-Za-z0-9_-]+)\\s*\\]\\]");
  private static final Pattern TABLE_HEADER = Pattern.compile("\\[\\s*([A-Za-z0-9_-]+)\\s*\\]");
  private static final Pattern ASSIGNMENT = Pattern.compile("([A-Za-z0-9_-]+)\\s*=\\s*(.*)");

  private final List<OpaqueKey> keys;
  private final int current;

  private KeyRing(List<OpaqueKey> keys, int current) {
    this.keys = List.copyOf(keys);
    this.current = current;
  }

  /** A ring of these keys; {@code current} (one of them) encodes. */
  public static KeyRing of(OpaqueKey current, OpaqueKey... others) {
    final List<OpaqueKey> keys = new ArrayList<>();
    keys.add(current);
    keys.addAll(List.of(others));
    return new KeyRing(keys, 0);
  }

  /** The key new IDs are encoded with. */
  public OpaqueKey current() {
    return keys.get(current);
  }

  /** The key with this id (ignoring case), or null. */
  public OpaqueKey find(String id) {
    for (OpaqueKey key : keys) {
      if (key.hasId(id)) return key;
    }
    return null;
  }

  public int size() {
    return keys.size();
  }

  /** Decodes an opaque text with the key it names. Fails when malformed or the key is not here. */
  public long decode(String text) {
    final String id = OpaqueKey.keyIdOf(text);
    final OpaqueKey key = find(id);
    if (key == null) {
      throw new IllegalArgumentException(
          "opaque ID '" + text + "' names key '" + id + "', which the key file lacks");
    }
    return key.parse(text);
  }

  /**
   * Reads a key file. Fails (IllegalArgumentException naming the file) when it cannot be read,
   * is not a regular file, group or others may read or write it (with the chmod that fixes
   * it), it is larger than 64 KiB, or its text fails {@link #parse}.
   */
  public static KeyRing load(Path path) {
    final byte[] bytes;
    try {
      if (!Files.isRegularFile(path)) {
        if (Files.exists(path, LinkOption.NOFOLLOW_LINKS) || Files.exists(path)) {
          throw new IllegalArgumentException("key file " + path + " is not a regular file");
        }
        throw new NoSuchFileException(path.toString());
      }
      final Set<PosixFilePermission> permissions;
      try {
        permissions = Files.getPosixFilePermissions(path);
      } catch (UnsupportedOperationException e) {
        throw new IllegalArgumentException("key file " + path + ": its file system has no POSIX"
            + " permissions, so its mode (0600 or stricter) cannot be checked");
      }
      final int mode = mode(permissions);
      if ((mode & 077) != 0) {
        throw new IllegalArgumentException("key file " + path + " has mode "
            + String.format(Locale.ROOT, "%04o", mode) + ": group or others may read or write"
            + " it; a key file must be mode 0600 or stricter (chmod 600 " + path + ")");
      }
      if (Files.size(path) > FILE_SIZE_MAX) {
        throw new IllegalArgumentException(
            "key file " + path + " is larger than " + FILE_SIZE_MAX + " bytes");
      }
      bytes = Files.readAllBytes(path);
    } catch (NoSuchFileException e) {
      throw new IllegalArgumentException("key file " + path + ": No such file or directory");
    } catch (IOException e) {
      throw new IllegalArgumentException("key file " + path + ": "
          + (e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName()));
    }
    try {
      return parse(new String(bytes, StandardCharsets.UTF_8), path.toString());
    } finally {
      java.util.Arrays.fill(bytes, (byte) 0);
    }
  }

  private static int mode(Set<PosixFilePermission> permissions) {
    int mode = 0;
    for (PosixFilePermission permission : permissions) {
      mode |= switch (permission) {
        case OWNER_READ -> 0400;
        case OWNER_WRITE -> 0200;
        case OWNER_EXECUTE -> 0100;
        case GROUP_READ -> 040;
        case GROUP_WRITE -> 020;
        case GROUP_EXECUTE -> 010;
        case OTHERS_READ -> 04;
        case OTHERS_WRITE -> 02;
        case OTHERS_EXECUTE -> 01;
      };
    }
    return mode;
  }

  /** The same from the file's text (no mode check); {@code source} names it in messages. */
  public static KeyRing parse(String text, String source) {
    final Map<String, Object> root = new LinkedHashMap<>();
    final List<Map<String, Object>> tables = new ArrayList<>();
    boolean keySingleTable = false; // [key]: not an array of tables
    Map<String, Object> table = root;
    final String[] lines = text.split("\r?\n", -1);
    for (int number = 1; number <= lines.length; ++number) {
      final String line = stripComment(lines[number - 1]).strip();
      if (line.isEmpty()) continue;
      final Matcher keyHeader = KEY_HEADER.matcher(line);
      final Matcher tableHeader = TABLE_HEADER.matcher(line);
      final Matcher assignment = ASSIGNMENT.matcher(line);
      if (keyHeader.matches()) {
        final String name = keyHeader.group(1);
        if (!name.equals("key")) {
          root.putIfAbsent(name, NOT_A_STRING);
          table = new LinkedHashMap<>(); // its contents are refused with it
          continue;
        }
        table = new LinkedHashMap<>();
        tables.add(table);
      } else if (tableHeader.matches()) {
        final String name = tableHeader.group(1);
        if (name.equals("key")) keySingleTable = true;
        if (root.containsKey(name)) throw notToml(source, "cannot redefine '" + name + "'", number);
        root.put(name, NOT_A_STRING);
        table = new LinkedHashMap<>();
      } else if (assignment.matches()) {
        final String name = assignment.group(1);
        if (table.containsKey(name)) {
          throw notToml(source, "cannot redefine existing key '" + name + "'", number);
        }
        table.put(name, value(assignment.group(2).strip(), source, number));
      } else {
        throw notToml(source, "expected name = \"value\", [[key]] or a comment"
            + " (this reader takes the subset of TOML a key file needs)", number);
      }
    }
    for (String name : root.keySet()) {
      if (!name.equals("current") && !name.equals("key")) {
        throw new IllegalArgumentException(
            source + ": unknown setting '" + name + "' (current and [[key]])");
      }
    }
    if (keySingleTable || (root.containsKey("current") && !(root.get("current") instanceof String))) {
      throw new IllegalArgumentException(
          source + ": key must be [[key]] tables and current a string such as \"k1\"");
    }
    if (tables.isEmpty()) {
      throw new IllegalArgumentException(
          source + ": no key; add [[key]] with id = \"k1\" and secret = 32 hex digits");
    }
    if (tables.size() > KEY_COUNT_MAX) {
      throw new IllegalArgumentException(source + ": more than " + KEY_COUNT_MAX + " keys");
    }
    final List<OpaqueKey> keys = new ArrayList<>();
    for (int i = 0; i < tables.size(); ++i) {
      final OpaqueKey key = readKey(tables.get(i), source, i);
      for (OpaqueKey known : keys) {
        if (known.hasId(key.id())) {
          throw new IllegalArgumentException(
              source + ": key id '" + key.id() + "' appears twice");
        }
      }
      keys.add(key);
    }
    final Object current = root.get("current");
    if (current == null && keys.size() > 1) {
      throw new IllegalArgumentException(source + ": " + keys.size()
          + " keys and no current = \"ID\" saying which one encodes new IDs");
    }
    int chosen = 0;
    if (current != null) {
      chosen = -1;
      for (int i = 0; i < keys.size() && chosen < 0; ++i) {
        if (keys.get(i).hasId((String) current)) chosen = i;
      }
      if (chosen < 0) {
        throw new IllegalArgumentException(
            source + ": current = \"" + current + "\" names no key");
      }
    }
    return new KeyRing(keys, chosen);
  }

  // One [[key]] table into an OpaqueKey.
  private static OpaqueKey readKey(Map<String, Object> table, String source, int index) {
    final String where = source + ": key " + (index + 1);
    for (String name : table.keySet()) {
      if (!name.equals("id") && !name.equals("secret")) {
        throw new IllegalArgumentException(
            where + " has an unknown setting '" + name + "' (only id and secret)");
      }
    }
    if (!(table.get("id") instanceof String id) || !(table.get("secret") instanceof String hex)) {
      throw new IllegalArgumentException(
          where + " needs both id = \"...\" and secret = \"...\"");
    }
    if (!hex.matches("[0-9A-Fa-f]{32}")) {
      throw new IllegalArgumentException(
          where + " (" + id + "): secret must be 32 hex digits (16 bytes)");
    }
    final byte[] secret = HexFormat.of().parseHex(hex);
    try {
      return new OpaqueKey(id, secret);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(where + ": " + e.getMessage());
    } finally {
      java.util.Arrays.fill(secret, (byte) 0);
    }
  }

  // A value: a quoted string ("..." without escapes, or '...'), else NOT_A_STRING.
  private static Object value(String text, String source, int number) {
    if (text.isEmpty()) throw notToml(source, "a value is missing after =", number);
    final char quote = text.charAt(0);
    if (quote != '"' && quote != '\'') return NOT_A_STRING;
    final int end = text.indexOf(quote, 1);
    if (end < 0) throw notToml(source, "a string is not closed", number);
    if (end != text.length() - 1) throw notToml(source, "text after a string", number);
    final String value = text.substring(1, end);
    if (quote == '"' && value.indexOf('\\') >= 0) {
      throw notToml(source, "escapes in strings are not read by this key file reader", number);
    }
    return value;
  }

  // The line without its comment: from the first # outside a quoted string.
  private static String stripComment(String line) {
    char quote = 0;
    for (int i = 0; i < line.length(); ++i) {
      final char c = line.charAt(i);
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#') {
        return line.substring(0, i);
      }
    }
    return line;
  }

  private static IllegalArgumentException notToml(String source, String why, int line) {
    return new IllegalArgumentException(source + ": not TOML: " + why + " at line " + line);
  }
}
