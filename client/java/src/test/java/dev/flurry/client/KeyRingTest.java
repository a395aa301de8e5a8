// client/java/.../KeyRingTest.java — the opaque form's key file (KeyRing): the README's file
// reads (current encodes, every key decodes, ids ignore case); mode 0600 or stricter is
// enforced with POSIX permissions; every malformed file is refused with the C++ client's
// message, naming the file (and the line, for what is not the TOML subset it reads).
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("behaviour")
class KeyRingTest {
  private static final String K1 = "000102030405060708090a0b0c0d0e0f";
  private static final String K2 = "8f3c1d6e2a9b4c7d0e1f2a3b4c5d6e7f";
  // README "ID forms", as written there.
  private static final String README_FILE = "current = \"k2\"          # encodes new IDs; may be"
      + " left out when there is one key\n\n[[key]]\nid = \"k1\"               # 1..8 chars of"
      + " a-z, 0-9\nsecret = \"" + K1 + "\"   # 16 bytes: head -c 16 /dev/urandom | xxd -p\n\n"
      + "[[key]]\nid = \"k2\"\nsecret = \"" + K2 + "\"\n";

  private static Path write(Path dir, String text, String mode) throws Exception {
    final Path path = dir.resolve("keys.toml");
    Files.writeString(path, text);
    Files.setPosixFilePermissions(path, PosixFilePermissions.fromString(mode));
    return path;
  }

  @Test
  void theReadmesFileReads(@TempDir Path dir) throws Exception {
    final KeyRing ring = KeyRing.load(write(dir, README_FILE, "rw-------"));
    assertEquals(2, ring.size());
    assertEquals("k2", ring.current().id());
    final String old = ring.find("k1").format(4194324487L);
    assertEquals("k1_2TJVZN1P765Y3", old);
    assertEquals(4194324487L, ring.decode(old)); // every key decodes
    assertEquals(4194324487L, ring.decode("K1_2tjvzn1p765y3")); // case ignored
    final String fresh = ring.current().format(4194324487L);
    assertEquals("k2_", fresh.substring(0, 3));
    assertEquals(4194324487L, ring.decode(fresh));
    assertNull(ring.find("k3"));
    final IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ring.decode("k3_2TJVZN1P765Y3"));
    assertEquals("opaque ID 'k3_2TJVZN1P765Y3' names key 'k3', which the key file lacks",
        e.getMessage());
    // One key needs no current; literal strings read too.
    assertEquals("k1", KeyRing.parse("[[key]]\nid = 'k1'\nsecret = '" + K1 + "'\n", "t")
        .current().id());
  }

  @Test
  void theModeIsEnforced(@TempDir Path dir) throws Exception {
    for (String mode : new String[] {"rw-r-----", "rw----r--", "rw--w----", "rwx---rwx"}) {
      final Path path = write(dir, README_FILE, mode);
      final IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> KeyRing.load(path), mode);
      final int bits = Integer.parseInt(
          PosixFilePermissions.toString(Files.getPosixFilePermissions(path))
              .replaceAll("[rwx]", "1").replace('-', '0'), 2);
      assertEquals("key file " + path + " has mode " + String.format("%04o", bits)
          + ": group or others may read or write it; a key file must be mode 0600 or stricter"
          + " (chmod 600 " + path + ")", e.getMessage());
    }
    assertEquals(2, KeyRing.load(write(dir, README_FILE, "r--------")).size());
    final Path missing = dir.resolve("missing.toml");
    assertEquals("key file " + missing + ": No such file or directory",
        assertThrows(IllegalArgumentException.class, () -> KeyRing.load(missing)).getMessage());
    assertEquals("key file " + dir + " is not a regular file",
        assertThrows(IllegalArgumentException.class, () -> KeyRing.load(dir)).getMessage());
  }

  @Test
  void badFilesAreRefusedSayingWhy() {
    final String key1 = "[[key]]\nid = \"k1\"\nsecret = \"" + K1 + "\"\n";
    final String[][] cases = {
        {"", "t: no key; add [[key]] with id = \"k1\" and secret = 32 hex digits"},
        {"currnet = \"k1\"\n" + key1, "t: unknown setting 'currnet' (current and [[key]])"},
        {"current = 1\n" + key1,
            "t: key must be [[key]] tables and current a string such as \"k1\""},
        {"[key]\nid = \"k1\"\n", "t: key must be [[key]] tables and current a string such as \"k1\""},
        {"[[key]]\nid = \"k1\"\n", "t: key 1 needs both id = \"...\" and secret = \"...\""},
        {"[[key]]\nid = 1\nsecret = \"" + K1 + "\"\n",
            "t: key 1 needs both id = \"...\" and secret = \"...\""},
        {key1 + "name = \"x\"\n", "t: key 1 has an unknown setting 'name' (only id and secret)"},
        {"[[key]]\nid = \"k1\"\nsecret = \"0001\"\n",
            "t: key 1 (k1): secret must be 32 hex digits (16 bytes)"},
        {"[[key]]\nid = \"K1\"\nsecret = \"" + K1 + "\"\n",
            "t: key 1: key id 'K1' must be 1 to 8 chars of a-z and 0-9"},
        {"[[key]]\nid = \"k1\"\nsecret = \"00000000000000000000000000000000\"\n",
            "t: key 1: key k1: the secret is all zero; generate one with: head -c 16"
                + " /dev/urandom | xxd -p"},
        {key1 + key1, "t: key id 'k1' appears twice"},
        {key1 + key1.replace("k1", "k2"),
            "t: 2 keys and no current = \"ID\" saying which one encodes new IDs"},
        {"current = \"k9\"\n" + key1, "t: current = \"k9\" names no key"},
        {"[[key]]\nid = \"k1\"\nid = \"k2\"\n",
            "t: not TOML: cannot redefine existing key 'id' at line 3"},
        {"[[key]]\nid = \"k1\nsecret = 1\n", "t: not TOML: a string is not closed at line 2"},
        {"[[key]]\njunk\n", "t: not TOML: expected name = \"value\", [[key]] or a comment (this"
            + " reader takes the subset of TOML a key file needs) at line 2"},
    };
    for (String[] c : cases) {
      final IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> KeyRing.parse(c[0], "t"), c[0]);
      assertEquals(c[1], e.getMessage(), c[0]);
    }
    final StringBuilder many = new StringBuilder("current = \"k0\"\n");
    for (int i = 0; i <= KeyRing.KEY_COUNT_MAX; ++i) {
      many.append("[[key]]\nid = \"k").append(i).append("\"\nsecret = \"").append(K1)
          .append("\"\n");
    }
    assertEquals("t: more than 64 keys", assertThrows(IllegalArgumentException.class,
        () -> KeyRing.parse(many.toString(), "t")).getMessage());
  }
}
