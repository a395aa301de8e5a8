// client/java/.../Key.java — an authentication key (PROTOCOL.md "Authentication"): the key id
// of the server's key file and its 16-byte SipHash-2-4 secret; and the client key file reader,
// with the rules and messages of the C++ client's read_key_file (client/key_file.cc).
//
// Contract: immutable; the secret never leaves except by secret() (a copy) and is never
// printed. readFile reads the TOML subset a client key file needs — top-level `id = N`,
// `secret = "32 hex digits"`, `name = "..."`, comments and blank lines — and refuses
// everything else naming the line, so a misspelt field does not go unnoticed.
package dev.flurry.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A signing key: with one (FlurryClient.Builder.key), every request is signed. */
public final class Key {
  /** The secret's size in bytes (SipHash-2-4's key). */
  public static final int SECRET_SIZE = 16;
  /** The largest key id (the trailer's u32). */
  public static final long ID_MAX = 0xffffffffL;
  // A key file is a few lines: anything larger is another file given by mistake.
  private static final long FILE_SIZE_MAX = 64 * 1024;
  private static final Set<PosixFilePermission> GROUP_OR_OTHERS = EnumSet.of(
      PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
  // `name = value`, then an optional comment; the value is checked per name.
  private static final Pattern ASSIGNMENT =
      Pattern.compile("([A-Za-z0-9_-]+)\\s*=\\s*(\"[^\"\\\\]*\"|[^\\s#\"]+)\\s*(#.*)?");
  private static final String NEEDS = "needs id = N and secret = \"32 hex digits\"";
  private static final String ID_RULE = "id must be a whole number in 1..4294967295";
  private static final String SECRET_RULE = "secret must be \"32 hex digits\" (16 bytes)";

  private final long id;
  private final byte[] secret;
  // The secret as SipHash's two little-endian key words, decoded once.
  final long k0;
  final long k1;

  /**
   * @param id the key id of the server's key file, 0..ID_MAX
   * @param secret its 16 secret bytes (copied)
   * @throws IllegalArgumentException if either is out of range
   */
  public Key(long id, byte[] secret) {
    if (id < 0 || id > ID_MAX) throw new IllegalArgumentException("key id " + id + " is not a u32");
    if (secret == null || secret.length != SECRET_SIZE) {
      throw new IllegalArgumentException("a key secret is " + SECRET_SIZE + " bytes");
    }
    this.id = id;
    this.secret = secret.clone();
    this.k0 = SipHash.littleEndian(secret, 0);
    this.k1 = SipHash.littleEndian(secret, 8);
  }

  public long id() {
    return id;
  }

  /** A copy of the secret. */
  public byte[] secret() {
    return secret.clone();
  }

  /** Names the key id only: a key printed in a log must not leak its secret. */
  @Override
  public String toString() {
    return "Key(id=" + id + ")";
  }

  /**
   * Reads a client key file: `id = N` (1..4294967295) and `secret = "32 hex digits"` at the
   * top level, `name = "..."` and comments allowed. Refused unless the file is mode 0600 or
   * stricter (no permission for group or others).
   *
   * @throws FlurryException INVALID_ARGUMENT "key file PATH: ..." naming what is wrong (the
   *     line, for an unknown or malformed one) and the fix when known
   */
  public static Key readFile(Path path) throws FlurryException {
    final List<String> lines;
    try {
      if (!Files.isRegularFile(path)) {
        if (Files.exists(path)) throw refuse(path, "not a regular file");
        throw new NoSuchFileException(path.toString());
      }
      final Set<PosixFilePermission> mode;
      try {
        mode = Files.getPosixFilePermissions(path);
      } catch (UnsupportedOperationException e) { // its message is null
        throw refuse(path, "its file system has no POSIX permissions, so its mode (0600 or"
            + " stricter) cannot be checked: keep the key file on a POSIX file system");
      }
      if (mode.stream().anyMatch(GROUP_OR_OTHERS::contains)) {
        throw refuse(path, "may be read by group or others; run chmod 600 " + path);
      }
      if (Files.size(path) > FILE_SIZE_MAX) throw refuse(path, "larger than 64 KiB: not a key file");
      lines = Files.readAllLines(path, StandardCharsets.UTF_8);
    } catch (FlurryException e) {
      throw e; // already names the problem (FlurryException is an IOException)
    } catch (NoSuchFileException e) {
      throw refuse(path, "No such file or directory");
    } catch (AccessDeniedException e) {
      throw refuse(path, "Permission denied");
    } catch (IOException | UnsupportedOperationException e) {
      // Never "null": some of these carry no message.
      throw refuse(path, e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName());
    }
    Long id = null;
    byte[] secret = null;
    boolean named = false;
    for (int number = 1; number <= lines.size(); ++number) {
      final String line = lines.get(number - 1).strip();
      if (line.isEmpty() || line.startsWith("#")) continue;
      final Matcher assignment = ASSIGNMENT.matcher(line);
      if (!assignment.matches()) {
        throw refuse(path, "line " + number + ": expected name = value (id, secret, name)");
      }
      final String name = assignment.group(1);
      final String value = assignment.group(2);
      final String where = "line " + number + ": ";
      final boolean twice = switch (name) {
        case "id" -> id != null;
        case "secret" -> secret != null;
        case "name" -> named;
        default -> throw refuse(path,
            where + "unknown key '" + name + "' (expected id, secret, name)");
      };
      if (twice) throw refuse(path, where + name + " given twice");
      switch (name) {
        case "id" -> id = parseId(path, where, value);
        case "secret" -> secret = parseSecret(path, where, value);
        default -> {
          if (!value.startsWith("\"")) throw refuse(path, where + "name must be a \"string\"");
          named = true;
        }
      }
    }
    if (id == null || secret == null) throw refuse(path, NEEDS);
    return new Key(id, secret);
  }

  private static long parseId(Path path, String where, String value) throws FlurryException {
    if (!value.matches("[0-9]{1,10}")) throw refuse(path, where + ID_RULE);
    final long id = Long.parseLong(value);
    if (id < 1 || id > ID_MAX) throw refuse(path, where + ID_RULE);
    return id;
  }

  private static byte[] parseSecret(Path path, String where, String value)
      throws FlurryException {
    if (!value.matches("\"[0-9A-Fa-f]{" + 2 * SECRET_SIZE + "}\"")) {
      throw refuse(path, where + SECRET_RULE);
    }
    return HexFormat.of().parseHex(value, 1, value.length() - 1);
  }

  private static FlurryException refuse(Path path, String why) {
    return new FlurryException(FlurryException.Code.INVALID_ARGUMENT,
        "key file " + path + ": " + why);
  }
}
