// client/java/.../AuthBehaviourTest.java — signing (PROTOCOL.md "Authentication") against
// FakeServer.signing, which checks request MACs as flurryd does and signs its answers: every
// request (PING, INFO, GET_IDS, GET_SEQ, prefetch refills) is signed and sized as the C++
// client's; each attempt gets a new timestamp and MAC; answers without a MAC, with a flipped
// MAC byte or for a wrong secret are counted and never used; an unsigned UNAUTHORIZED is named
// only once the attempts run out; a signed UNAUTHORIZED ends the call, a signed RETRY is a
// RETRY. Requests are bound to one server: the first GET_IDS to a server is signed for any
// server, answered wrong_server naming its node, and signed again for it at once without using
// an attempt (at most twice in a row); PING and INFO for any server are served and teach the
// node too. stale_timestamp is named as a clock problem; a signed client whose attempts all
// time out is told that a server drops unknown key ids and bad MACs. And the client key file:
// read, mode checked, bad lines refused naming the line.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Tag("behaviour")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AuthBehaviourTest {
  private static final String SECRET_HEX = "000102030405060708090a0b0c0d0e0f";
  private static final Key KEY = new Key(7, HexFormat.of().parseHex(SECRET_HEX));
  // The attempt timeout where the server answers: it never elapses unless the client is
  // broken (a fake server in this process is not seconds late, however loaded the machine),
  // so a late answer (which would fail to verify against the next attempt's MAC) cannot
  // change a count.
  private static final long TIMEOUT_MS = 5_000;
  // Where every attempt must time out while the server's (unusable) answers must still arrive
  // within it to be counted: no answer is this late on a loaded machine (2 shared cores).
  private static final long ANSWERS_UNUSED_TIMEOUT_MS = 1_000;
  // Where the server never answers: nothing can arrive late, so the timeout can be short.
  private static final long SILENT_TIMEOUT_MS = 150;

  private static FlurryClient.Builder signedClient(FakeServer server, Key key) {
    return FlurryClient.builder().servers(server.address()).timeout(Duration.ofMillis(TIMEOUT_MS))
        .key(key);
  }

  // The wall clock in microseconds, as the client stamps requests.
  private static long nowUs() {
    final Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
  }

  private static void assertSigned(List<FakeServer.Request> requests, long fromUs) {
    assertSigned(requests, fromUs, 5);
  }

  // Every request was signed with KEY, verified, stamped with the wall clock between fromUs
  // (taken before the client was built) and now (give or take a clock step), and sized as the
  // C++ client's encode(): 3 bytes more than the unsigned padding, at least 44 (GET_SEQ: and
  // room for its name before the trailer). Every GET_IDS and GET_SEQ the server served was
  // signed for its node; PING and INFO for it or for any server.
  private static void assertSigned(List<FakeServer.Request> requests, long fromUs, long node) {
    final long nowUs = nowUs();
    for (FakeServer.Request request : requests) {
      final FakeServer.Trailer trailer = request.trailer();
      assertNotNull(trailer, "an unsigned request: " + request);
      assertTrue(trailer.verified(), "a request MAC that does not verify: " + request);
      assertEquals(KEY.id(), trailer.keyId());
      if (request.opcode() == Wire.Opcode.GET_IDS.code
          || request.opcode() == Wire.Opcode.GET_SEQ.code) {
        assertEquals(node, trailer.server(), "signed for another server: " + request);
      } else {
        assertTrue(trailer.server() == node || trailer.server() == Wire.ANY_SERVER,
            "signed for another server: " + request);
      }
      // Stamped during the test's own run, however long it took; the 30 s margin is for a
      // step of the wall clock (NTP on a fresh machine), not for the machine's speed.
      assertTrue(trailer.timestampUs() >= fromUs - 30_000_000L
              && trailer.timestampUs() <= nowUs + 30_000_000L,
          "timestamp " + trailer + " outside " + fromUs + ".." + nowUs);
      final boolean issues = request.opcode() == Wire.Opcode.GET_IDS.code
          || request.opcode() == Wire.Opcode.GET_SEQ.code;
      final int padded = issues
          ? Wire.requestSizeForIds(request.count(), Exchange.IDS_PER_RANGE_ASSUMED)
          : Wire.REQUEST_HEADER_SIZE;
      final int body = request.name() == null ? 0 : 1 + request.name().length();
      assertEquals(Math.max(padded + 3, Auth.SIGNED_REQUEST_SIZE_MIN + body), request.size(),
          "size of " + request);
    }
  }

  @Test
  void everyRequestIsSignedAndVerifiedIdsArrive() throws Exception {
    final long fromUs = nowUs();
    try (FakeServer server = FakeServer.signing(KEY, 1000, (s, request, index) -> {
          if (request.opcode() == Wire.Opcode.GET_SEQ.code) {
            s.reply(TestResponses.encode(request.opcode(), 0, 5, request.requestId(), 0,
                List.of(new Wire.Range(1, request.count())), null));
          } else {
            s.answerIds(request, 4096, 3);
          }
        });
        FlurryClient flurry = signedClient(server, KEY).build()) {
      assertEquals(5000, flurry.get(5000).length);
      flurry.ping();
      assertEquals(Layout.DEFAULT_EPOCH_MS, flurry.info().epochMs());
      assertArrayEquals(new long[] {1, 2, 3}, flurry.getSeq("orders", 3));
      final Counters counters = flurry.counters();
      assertEquals(0, counters.unverifiedResponses());
      assertEquals(counters.requests(), counters.responses());
      final List<FakeServer.Request> requests = server.requests();
      assertSigned(requests, fromUs);
      assertEquals("orders", requests.get(requests.size() - 1).name());
      assertEquals(0, server.badMacs());
    }
  }

  // The first GET_IDS to a server costs one extra request (wrong_server names the node; signed
  // again for it at once, no attempt used), later calls none; a PING first teaches the node
  // for free; a node that moves is followed the same way.
  @Test
  void wrongServerIsSignedAgainForTheNodeItNames() throws Exception {
    final long fromUs = nowUs();
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FlurryClient flurry = signedClient(server, KEY).attempts(1).build()) {
      server.setNode(9);
      assertEquals(1, flurry.get(1).length);
      assertEquals(1, server.wrongServerAnswers());
      assertEquals(2, flurry.counters().requests(), "the first call: one re-sign");
      assertEquals(1, flurry.get(1).length);
      assertEquals(1, server.wrongServerAnswers(), "the second call was signed for node 9");
      assertEquals(3, flurry.counters().requests());
      assertSigned(server.requests(), fromUs, 9);
      // The node id moves (another process took the server's place): followed once more.
      server.setNode(10);
      assertEquals(1, flurry.get(1).length);
      assertEquals(2, server.wrongServerAnswers());
      assertEquals(5, flurry.counters().requests());
      assertEquals(0, flurry.counters().timeouts());
      assertEquals(0, flurry.counters().unverifiedResponses());
    }
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FlurryClient flurry = signedClient(server, KEY).attempts(1).build()) {
      assertEquals(5, flurry.ping().node()); // signed for any server: served, node learnt
      assertEquals(Wire.ANY_SERVER, server.requests().get(0).trailer().server());
      assertEquals(3, flurry.get(3).length);
      assertEquals(0, server.wrongServerAnswers());
      assertEquals(2, flurry.counters().requests());
      assertSigned(server.requests(), fromUs, 5);
    }
  }

  // A server that names another node each time is refused after two re-signs in a row, as
  // any UNAUTHORIZED: three requests, none of the attempts used for another server.
  @Test
  void aServerThatKeepsNamingAnotherNodeIsRefused() throws Exception {
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FakeServer other = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FlurryClient flurry = FlurryClient.builder().servers(server.address(), other.address())
            .timeout(Duration.ofMillis(TIMEOUT_MS)).key(KEY).attempts(5).build()) {
      server.moveNodeOnWrongServer();
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code(), e.getMessage());
      assertEquals(server.address() + " answered UNAUTHORIZED (wrong_server) to GET_IDS: the"
          + " server kept naming another node id than the one the request was signed for",
          e.getMessage());
      assertEquals(1 + Exchange.RESIGNS_MAX, server.wrongServerAnswers());
      assertEquals(1 + Exchange.RESIGNS_MAX, flurry.counters().requests());
      assertEquals(0, other.requests().size() + other.wrongServerAnswers());
    }
  }

  // stale_timestamp comes back signed (the MAC verified): the client trusts it and names the
  // clocks.
  @Test
  void aStaleTimestampIsNamedAsAClockProblem() throws Exception {
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.reply(TestResponses.header(request.opcode(), Wire.Status.UNAUTHORIZED,
                request.requestId(), 35)));
        FlurryClient flurry = signedClient(server, KEY).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::info);
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code());
      assertEquals(server.address() + " answered UNAUTHORIZED (stale_timestamp) to INFO: this"
          + " client's clock is further from the server's than its window allows, or the server"
          + " started (or took its node id) after the request was signed: check both clocks"
          + " (NTP)", e.getMessage());
      assertEquals(1, flurry.counters().requests());
    }
  }

  @Test
  void prefetchRefillsAreSigned() throws Exception {
    final long fromUs = nowUs();
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FlurryClient flurry = signedClient(server, KEY).prefetch(64).idsPerRequest(64).build()) {
      // The refill thread fills at once, at its own pace (a bounded wait).
      assertTrue(Eventually.holds(() -> flurry.counters().prefetchRefills() > 0),
          flurry.counters().toString());
      for (int i = 0; i < 200; ++i) flurry.next();
      assertSigned(server.requests(), fromUs);
      assertEquals(0, flurry.counters().unverifiedResponses());
    }
  }

  @Test
  void answersWithoutOrWithAWrongMacAreCountedAndIgnored() throws Exception {
    for (boolean strip : new boolean[] {true, false}) {
      try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) -> {
            final byte[] answer = TestResponses.ids(request.requestId(),
                s.issue(request.count(), 4096, 3));
            final byte[] signed = s.sign(answer);
            signed[signed.length - 1] ^= 0x01;
            s.send(strip ? answer : signed);
          });
          FlurryClient flurry = signedClient(server, KEY).attempts(2)
              .timeout(Duration.ofMillis(ANSWERS_UNUSED_TIMEOUT_MS)).build()) {
        final FlurryException e = assertThrows(FlurryException.class, flurry::next);
        assertEquals(FlurryException.Code.NO_ANSWER, e.code(), e.getMessage());
        final Counters counters = flurry.counters();
        assertEquals(2, counters.unverifiedResponses(), "one per attempt (strip " + strip + ")");
        assertEquals(0, counters.idsReceived());
        assertEquals(0, counters.malformedResponses());
        assertEquals(2, counters.timeouts());
      }
    }
  }

  @Test
  void theAttemptWaitsOnPastUntrustedAnswersForTheVerifiedOne() throws Exception {
    try (FakeServer server = FakeServer.signing(KEY, 100, (s, request, index) -> {
          final byte[] forged = s.sign(TestResponses.ids(request.requestId(),
              List.of(new Wire.Range(1L << 40, 1))));
          forged[Wire.RESPONSE_HEADER_SIZE + 7] ^= 0x01; // another ID: the MAC no longer fits
          s.send(forged);
          s.send(TestResponses.header(request.opcode(), Wire.Status.UNAUTHORIZED,
              request.requestId(), 32)); // auth_unsupported, unsigned: anyone could send it
          s.answerIds(request, 4096, 3);
        });
        FlurryClient flurry = signedClient(server, KEY).attempts(1).build()) {
      assertArrayEquals(new long[] {100}, flurry.get(1));
      final Counters counters = flurry.counters();
      assertEquals(2, counters.unverifiedResponses());
      assertEquals(0, counters.timeouts());
      // The first GET_IDS to a server is signed for any server and answered wrong_server
      // (naming its node), then signed again for it: one extra request, no attempt used.
      assertEquals(2, counters.requests());
      assertEquals(1, server.wrongServerAnswers());
    }
  }

  @Test
  void anUnsignedUnauthorizedIsNamedOnceTheAttemptsRunOut() throws Exception {
    try (FakeServer server = new FakeServer(0, (s, request, index) -> s.reply(
            TestResponses.header(request.opcode(), Wire.Status.UNAUTHORIZED, request.requestId(),
                32))); // auth_unsupported (--auth off), unsigned
        FlurryClient flurry = signedClient(server, KEY).attempts(3)
            .timeout(Duration.ofMillis(ANSWERS_UNUSED_TIMEOUT_MS)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(10));
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code());
      assertEquals("no verifiable answer after 3 attempts; an unsigned UNAUTHORIZED"
          + " (auth_unsupported) came back, which a signed client cannot trust: check the key id, secret and clock",
          e.getMessage());
      assertEquals(3, Eventually.reaches(() -> server.requests().size(), 3),
          "the refusal ended the call early");
      assertEquals(3, flurry.counters().unverifiedResponses());
      assertEquals(3, flurry.counters().timeouts());
    }
  }

  @Test
  void aSignedUnauthorizedEndsTheCallAndASignedRetryIsARetry() throws Exception {
    try (FakeServer server = FakeServer.signing(KEY, 500, (s, request, index) -> {
          if (request.opcode() == Wire.Opcode.INFO.code) { // not_permitted, signed
            s.reply(TestResponses.header(request.opcode(), Wire.Status.UNAUTHORIZED,
                request.requestId(), 39));
          } else if (index == 0) { // rate_limited: RETRY with the hint, signed
            s.reply(TestResponses.header(request.opcode(), Wire.Status.RETRY,
                request.requestId(), 2_000));
          } else {
            s.answerIds(request, 4096, 3);
          }
        });
        FlurryClient flurry = signedClient(server, KEY).attempts(1).build()) {
      assertArrayEquals(new long[] {500, 501}, flurry.get(2));
      assertEquals(1, flurry.counters().retries());
      final FlurryException e = assertThrows(FlurryException.class, flurry::info);
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code());
      assertEquals(server.address() + " answered UNAUTHORIZED (not_permitted) to INFO: the key is"
          + " not allowed this request (see flurryctl keys list)", e.getMessage());
      assertEquals(3, server.requests().size());
      assertEquals(0, flurry.counters().unverifiedResponses());
    }
  }

  @Test
  void eachAttemptIsSignedAnew() throws Exception {
    final long fromUs = nowUs();
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) -> {
          if (index > 0) s.answerIds(request, 4096, 3); // the first attempt times out
        });
        FlurryClient flurry = signedClient(server, KEY).attempts(2)
            .timeout(Duration.ofMillis(ANSWERS_UNUSED_TIMEOUT_MS)).build()) {
      flurry.get(1);
      final List<FakeServer.Request> requests = server.requests();
      assertEquals(2, requests.size());
      assertSigned(requests, fromUs);
      final FakeServer.Trailer first = requests.get(0).trailer();
      final FakeServer.Trailer second = requests.get(1).trailer();
      // A resent copy would be a replay: the timestamp moved on by at least about the timeout
      // (the second attempt is sent once the first timed out). A lower bound: a slow machine
      // only makes the gap longer.
      assertTrue(second.timestampUs() - first.timestampUs() >= ANSWERS_UNUSED_TIMEOUT_MS * 1000 / 2,
          "timestamps " + first + " then " + second);
      assertNotEquals(first.mac(), second.mac());
    }
  }

  @Test
  void aWrongSecretGetsNothing() throws Exception {
    final byte[] wrong = KEY.secret();
    wrong[0] ^= (byte) 0x80;
    try (FakeServer server = FakeServer.signing(KEY, 0, (s, request, index) ->
            s.answerIds(request, 4096, 3));
        FlurryClient flurry = signedClient(server, new Key(KEY.id(), wrong)).attempts(2)
            .timeout(Duration.ofMillis(SILENT_TIMEOUT_MS)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::next);
      assertEquals(FlurryException.Code.NO_ANSWER, e.code(), "a bad MAC is dropped: " + e);
      assertEquals("no answer from " + server.address() + " after 2 attempts of "
          + SILENT_TIMEOUT_MS + " ms (a server drops signed requests whose key id it does not"
          + " know or whose MAC does not verify: check the key id and secret, flurryctl keys"
          + " list)", e.getMessage());
      // The server's thread drops requests at its own pace, maybe after the call gave up.
      assertEquals(2, Eventually.reaches(server::badMacs, 2));
      assertEquals(0, flurry.counters().idsReceived());
    }
  }

  @Test
  void anUnsignedClientIsToldToUseAKey() throws Exception {
    try (FakeServer server = new FakeServer(0, (s, request, index) -> s.reply(
            TestResponses.header(request.opcode(), Wire.Status.UNAUTHORIZED, request.requestId(),
                41)));
        FlurryClient flurry = FlurryClient.builder().servers(server.address())
            .timeout(Duration.ofMillis(TIMEOUT_MS)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::next);
      assertEquals(FlurryException.Code.UNAUTHORIZED, e.code());
      assertEquals(server.address() + " answered UNAUTHORIZED (auth_required) to GET_IDS: this"
          + " server requires authentication; give the client a key (FlurryClient.Builder.key,"
          + " Key.readFile)", e.getMessage());
      assertEquals(null, server.requests().get(0).trailer());
    }
  }

  // ---- the client key file ----

  private static Path keyFile(Path dir, String text, String mode) throws Exception {
    final Path path = dir.resolve("client.key");
    Files.writeString(path, text);
    Files.setPosixFilePermissions(path, PosixFilePermissions.fromString(mode));
    return path;
  }

  private static void assertRefused(Path path, String why) {
    final FlurryException e = assertThrows(FlurryException.class, () -> Key.readFile(path));
    assertEquals(FlurryException.Code.INVALID_ARGUMENT, e.code());
    assertEquals("key file " + path + ": " + why, e.getMessage());
  }

  @Test
  void aKeyFileIsReadAndItsModeChecked(@TempDir Path dir) throws Exception {
    final String good = "# a client key\nname = \"billing\"\nid = 7\n"
        + "secret = \"" + SECRET_HEX + "\"   # from flurryctl\n\n";
    final Path path = keyFile(dir, good, "rw-------");
    final Key key = Key.readFile(path);
    assertEquals(7, key.id());
    assertArrayEquals(KEY.secret(), key.secret());
    assertEquals("Key(id=7)", key.toString());
    keyFile(dir, good, "rw-r--r--");
    assertRefused(path, "may be read by group or others; run chmod 600 " + path);
    keyFile(dir, good, "r--------");
    assertEquals(7, Key.readFile(path).id());
    assertRefused(dir.resolve("missing.key"), "No such file or directory");
    assertRefused(dir, "not a regular file");
  }

  @Test
  void aKeyFileWithoutPosixPermissionsIsRefusedSayingSo(@TempDir Path dir) throws Exception {
    // A zip file system has no POSIX permissions (unless asked for): the mode cannot be checked.
    try (FileSystem zip = FileSystems.newFileSystem(dir.resolve("keys.zip"),
        Map.of("create", "true"))) {
      final Path path = zip.getPath("client.key");
      Files.writeString(path, "id = 7\nsecret = \"" + SECRET_HEX + "\"\n");
      assertRefused(path, "its file system has no POSIX permissions, so its mode (0600 or"
          + " stricter) cannot be checked: keep the key file on a POSIX file system");
    }
  }

  @Test
  void badKeyFilesAreRefusedNamingTheLine(@TempDir Path dir) throws Exception {
    final String secret = "secret = \"" + SECRET_HEX + "\"\n";
    final String[][] cases = {
        {"id = 7\nsecret = \"0001\"\n", "line 2: secret must be \"32 hex digits\" (16 bytes)"},
        {"id = 7\nsecret = 000102\n", "line 2: secret must be \"32 hex digits\" (16 bytes)"},
        {"id = 7\n" + secret + "secrte = 1\n",
            "line 3: unknown key 'secrte' (expected id, secret, name)"},
        {"[key]\nid = 7\n" + secret, "line 1: expected name = value (id, secret, name)"},
        {"id = 0\n" + secret, "line 1: id must be a whole number in 1..4294967295"},
        {"id = 4294967296\n" + secret, "line 1: id must be a whole number in 1..4294967295"},
        {"id = 7\nid = 8\n" + secret, "line 2: id given twice"},
        {"id = 7\n", "needs id = N and secret = \"32 hex digits\""},
        {secret, "needs id = N and secret = \"32 hex digits\""},
    };
    for (String[] c : cases) assertRefused(keyFile(dir, c[0], "rw-------"), c[1]);
  }
}
