// client/java/.../AuthIntegrationTest.java — signing against a real flurryd (binary from env
// FLURRYD) started with --auth required and a key file (key 7: get_ids, info, get_seq): the
// signed client gets unique IDs (directly and through prefetch), all verified; the same
// client without a key is refused (UNAUTHORIZED auth_required, which an unsigned client takes
// as it comes); a client with a wrong secret or an unknown key id gets no answer (both are
// dropped: no oracle), and is told so; the first GET_IDS of a client is signed for any server,
// answered wrong_server naming node 9 and signed again for it (one extra request, once).
// Bounded; the flurryd is killed and reaped by PID and its files removed in @AfterAll.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Tag("integration")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AuthIntegrationTest {
  private static final String SECRET_HEX = "8f3c1d6e2a9b4c7d0e1f2a3b4c5d6e7f";
  private static final Key KEY = new Key(7, HexFormat.of().parseHex(SECRET_HEX));
  // Not the node ids of IntegrationTest (1, 2): the two classes never share a node.
  private static final int NODE_ID = 9;
  private static Path keyDir;
  private static Flurryd flurryd;

  @BeforeAll
  static void startServer() throws Exception {
    keyDir = Files.createTempDirectory("flurry-java-auth-");
    final Path keys = keyDir.resolve("keys.toml");
    Files.writeString(keys, "[[key]]\nname = \"java\"\nid = " + KEY.id() + "\nsecret = \""
        + SECRET_HEX + "\"\nopcodes = [\"get_ids\", \"info\", \"get_seq\"]\n");
    Files.setPosixFilePermissions(keys, PosixFilePermissions.fromString("rw-------"));
    flurryd = Flurryd.start(NODE_ID, List.of("--auth", "required", "--key-file", keys.toString(),
        "--replay-slots", "65536"));
    System.out.println("flurryd --auth required, node " + NODE_ID + " pid " + flurryd.pid()
        + " on " + flurryd.address);
  }

  @AfterAll
  static void stopServer() throws Exception {
    try {
      if (flurryd != null) flurryd.close();
    } finally {
      Files.deleteIfExists(keyDir.resolve("keys.toml"));
      Files.deleteIfExists(keyDir);
    }
  }

  // Where flurryd answers: a timeout no answer comes near on a loaded machine (2 shared cores,
  // a sanitizer build; a second was seen exceeded in CI), so no call runs out of attempts. Where
  // it never answers (a bad MAC is dropped) the timeout is the subject and stays short
  // (NO_ANSWER_TIMEOUT).
  private static final Duration TIMEOUT = Duration.ofSeconds(5);
  private static final Duration NO_ANSWER_TIMEOUT = Duration.ofMillis(200);

  private static FlurryClient.Builder client(Key key) {
    return FlurryClient.builder().servers(flurryd.address).timeout(TIMEOUT).attempts(3).key(key);
  }

  @Test
  void aSignedClientGetsUniqueVerifiedIds() throws Exception {
    try (FlurryClient flurry = client(KEY).build();
        FlurryClient prefetched = client(KEY).prefetch(4_096).build()) {
      final Layout layout = flurry.layout(); // INFO, signed
      final long[] batch = flurry.get(50_000);
      final long[] singles = new long[5_000];
      for (int i = 0; i < singles.length; ++i) singles[i] = prefetched.next();
      flurry.ping();
      final long[] ids = new long[batch.length + singles.length];
      System.arraycopy(batch, 0, ids, 0, batch.length);
      System.arraycopy(singles, 0, ids, batch.length, singles.length);
      Arrays.sort(ids);
      for (int i = 1; i < ids.length; ++i) {
        if (ids[i] == ids[i - 1]) throw new AssertionError("duplicate ID " + ids[i]);
      }
      for (long id : new long[] {ids[0], ids[ids.length - 1]}) {
        assertEquals(NODE_ID, layout.decode(id).node(), "node of " + id);
      }
      for (FlurryClient client : List.of(flurry, prefetched)) {
        final Counters counters = client.counters();
        // flurryd signs every answer; one fails to verify only when it is the late answer to
        // a timed-out attempt (it arrives during the next attempt, whose MAC differs): at most
        // one per timeout, however slow the machine. Verification comes first, so a late
        // answer is never counted malformed.
        assertTrue(counters.unverifiedResponses() <= counters.timeouts(), counters.toString());
        assertEquals(0, counters.malformedResponses(), counters.toString());
      }
      System.out.println("signed " + flurry.counters() + "\nprefetched " + prefetched.counters());
    }
  }

  @Test
  void withoutAKeyGetIdsIsRefused() throws Exception {
    try (FlurryClient flurry = client(null).build()) {
      flurry.ping(); // unsigned PING is still served
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code());
      assertEquals(flurryd.address + " answered UNAUTHORIZED (auth_required) to GET_IDS: this"
          + " server requires authentication; give the client a key (FlurryClient.Builder.key,"
          + " Key.readFile)", e.getMessage());
    }
  }

  @Test
  void aWrongSecretGetsNoAnswer() throws Exception {
    final byte[] wrong = KEY.secret();
    wrong[15] ^= 0x01;
    try (FlurryClient flurry = client(new Key(KEY.id(), wrong)).timeout(NO_ANSWER_TIMEOUT)
        .build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.NO_ANSWER, e.code(), "a bad MAC is dropped: " + e);
      assertEquals(0, flurry.counters().idsReceived());
    }
  }

  @Test
  void anUnknownKeyIdGetsNoAnswerAndIsToldWhy() throws Exception {
    try (FlurryClient flurry = client(new Key(KEY.id() + 1, KEY.secret()))
        .timeout(NO_ANSWER_TIMEOUT).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.NO_ANSWER, e.code(), e.getMessage());
      assertEquals("no answer from " + flurryd.address + " after 3 attempts of "
          + NO_ANSWER_TIMEOUT.toMillis() + " ms (a server drops signed requests whose key id it"
          + " does not know or whose MAC does not verify: check the key id and secret,"
          + " flurryctl keys list)", e.getMessage());
      final Counters counters = flurry.counters();
      assertEquals(3, counters.timeouts(), counters.toString());
      assertEquals(0, counters.unverifiedResponses(), counters.toString());
    }
  }

  // The server's node id is learnt from its wrong_server answer: the first call costs one
  // extra request, the second none. A timed-out attempt is one more request whatever it was
  // (a late answer never counts as a response), so the count is of requests less timeouts.
  @Test
  void theFirstGetIdsIsSignedAgainForTheServersNode() throws Exception {
    try (FlurryClient flurry = client(KEY).build()) {
      final long[] first = flurry.get(1);
      final long[] second = flurry.get(1);
      assertTrue(first[0] != second[0], "a duplicate ID");
      final Counters counters = flurry.counters();
      assertEquals(3, counters.requests() - counters.timeouts(), counters.toString());
      assertEquals(0, counters.malformedResponses(), counters.toString());
    }
  }
}
