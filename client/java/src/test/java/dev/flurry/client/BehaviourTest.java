// client/java/.../BehaviourTest.java — the client's behaviour against FakeServer (real UDP on
// 127.0.0.1, answers scripted per request): RETRY back-off honours the hint within its bounds
// and budget, FENCED and timeouts move to the next server, late and foreign answers are
// ignored, every malformed answer is counted and never used, partial answers are asked
// again with the padding rule, BAD_REQUEST / UNAUTHORIZED end the call, ping / info / layout,
// prefetch, close, interrupts, polling (Options.poll), option checks, and GET_SEQ following
// NOT_OWNER to the node that owns a monotonic sequence. Every wait is bounded (the client's
// own timeouts, Eventually's deadline). Assertions are about what the client did (counts,
// answers, errors), never about how fast a thread was scheduled: where a server answers, the
// attempt timeout is far beyond any delay; a lower bound on a wait stays (a slow machine only
// lengthens it); an upper bound stays only far above the stall it would reveal.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Tag("behaviour")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BehaviourTest {
  private static final long MS = 1_000_000;
  // The attempt timeout of every client whose servers answer: it never elapses unless the
  // client is broken (a fake server in this process is not seconds late, however loaded the
  // machine), so no count below depends on how fast a server thread was scheduled.
  private static final long TIMEOUT_MS = 5_000;
  // Tests where a silent server must time out but another server's answers must not: an
  // answer is never this late on a loaded machine (2 shared cores), and each silent attempt
  // costs only this much.
  private static final long SILENT_TIMEOUT_MS = 1_000;
  // Tests where every server is silent: nothing can arrive late, so the timeout can be short.
  private static final long ALL_SILENT_TIMEOUT_MS = 250;

  private static FlurryClient.Builder client(FakeServer... servers) {
    final List<String> addresses = new ArrayList<>();
    for (FakeServer server : servers) addresses.add(server.address());
    return FlurryClient.builder().servers(addresses).timeout(Duration.ofMillis(TIMEOUT_MS));
  }

  private static long gapNanos(FakeServer server, int from, int to) {
    final List<FakeServer.Request> requests = server.requests();
    return requests.get(to).receivedNanos() - requests.get(from).receivedNanos();
  }

  private static void assertConsecutive(long[] ids, long first) {
    for (int i = 0; i < ids.length; ++i) assertEquals(first + i, ids[i], "ID " + i);
  }

  // ---- RETRY ----

  @Test
  void retryWaitsTheServersHintAndAsksTheSameServer() throws Exception {
    try (FakeServer server = new FakeServer(1000, (s, request, index) -> {
          if (index < 2) {
            s.reply(TestResponses.header(1, Wire.Status.RETRY, request.requestId(), 40_000));
          } else {
            s.answerIds(request, 4096, 3);
          }
        });
        FlurryClient flurry = client(server).attempts(1).retryWaitMax(Duration.ofSeconds(1))
            .build()) {
      assertConsecutive(flurry.get(5), 1000); // two RETRYs used no attempt of the one allowed
      assertTrue(gapNanos(server, 0, 1) >= 40 * MS, "waited " + gapNanos(server, 0, 1));
      assertTrue(gapNanos(server, 1, 2) >= 40 * MS, "waited " + gapNanos(server, 1, 2));
      final Counters counters = flurry.counters();
      assertEquals(2, counters.retries());
      assertEquals(3, counters.requests());
      assertEquals(3, counters.responses());
      assertEquals(0, counters.timeouts());
    }
  }

  @Test
  void retryHintIsCappedByRetryWaitMaxAndZeroStillWaits() throws Exception {
    final long[] hints = {40_000_000, 0}; // 40 s: capped to 30 ms; 0: at least 50 µs
    try (FakeServer server = new FakeServer(0, (s, request, index) -> {
          if (index < hints.length) {
            s.reply(TestResponses.header(1, Wire.Status.RETRY, request.requestId(), hints[index]));
          } else {
            s.answerIds(request, 4096, 3);
          }
        });
        FlurryClient flurry = client(server).retryWaitMax(Duration.ofMillis(30)).build()) {
      flurry.get(1);
      final long capped = gapNanos(server, 0, 1);
      // At least the cap; and less than the 40 s hint, which an uncapped wait would take: not
      // a latency bound (no stall on a loaded machine comes near 40 s), the cap's proof.
      assertTrue(capped >= 30 * MS && capped < 40_000 * MS, "capped wait " + capped);
      assertTrue(gapNanos(server, 1, 2) >= Exchange.RETRY_WAIT_MIN_NANOS, "zero hint busy-looped");
      assertEquals(2, flurry.counters().retries());
    }
  }

  @Test
  void retryBudgetRunsOut() throws Exception {
    try (FakeServer server = new FakeServer(0, (s, request, index) ->
            s.reply(TestResponses.header(1, Wire.Status.RETRY, request.requestId(), 20_000)));
        FlurryClient flurry = client(server).retryBudget(Duration.ofMillis(100)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.RETRY_EXHAUSTED, e.code());
      assertTrue(e.getMessage().contains(server.address()), e.getMessage());
      assertTrue(e.getMessage().contains("budget 100 ms"), e.getMessage());
      assertEquals(6, server.requests().size()); // 5 waits of 20 ms fit the budget, a 6th not
    }
  }

  // ---- FENCED and timeouts: the next server ----

  @Test
  void fencedMovesToTheNextServer() throws Exception {
    try (FakeServer fenced = new FakeServer(0, (s, request, index) ->
            s.reply(TestResponses.header(1, Wire.Status.FENCED, request.requestId(), 0)));
        FakeServer good = FakeServer.issuing(5000, 4096, 3);
        FlurryClient flurry = client(fenced, good).build()) {
      assertConsecutive(flurry.get(3), 5000);
      assertConsecutive(flurry.get(2), 5004); // stays on the server that answered (one ID skipped)
      assertEquals(1, fenced.requests().size());
      assertEquals(1, flurry.counters().fenced());
      assertEquals(5, flurry.counters().idsReceived());
    }
  }

  @Test
  void everyServerFencedFailsWithFenced() throws Exception {
    final FakeServer.Handler fence = (s, request, index) -> s.reply(TestResponses.header(
        request.opcode(), request.opcode() == 1 ? Wire.Status.FENCED : Wire.Status.OK,
        request.requestId(), 0));
    try (FakeServer a = new FakeServer(0, fence);
        FakeServer b = FakeServer.silent();
        FlurryClient flurry = client(a, b).attempts(4)
            .timeout(Duration.ofMillis(SILENT_TIMEOUT_MS)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.FENCED, e.code());
      assertEquals("no server could serve the request after 4 attempts: " + a.address()
          + " answered FENCED 2 times (it holds no node id: lost, or not yet claimed); "
          + b.address()
          + " gave no answer within " + SILENT_TIMEOUT_MS + " ms 2 times", e.getMessage());
      assertEquals(2, flurry.counters().fenced());
      assertEquals(2, flurry.counters().timeouts());
      // PING is answered by a fenced server: no failover for it.
      assertEquals(a.address(), flurry.ping().server());
    }
  }

  // FENCED with detail 1: the server is draining (its operator stops it). Named apart from a
  // lost node id, and when every FENCED seen was draining the call fails DRAINING.
  @Test
  void drainingServersAreNamedAndFailWithDraining() throws Exception {
    final FakeServer.Handler drain = (s, request, index) -> s.reply(TestResponses.header(
        request.opcode(), Wire.Status.FENCED, request.requestId(), Wire.FENCED_DRAINING));
    final FakeServer.Handler lost = (s, request, index) -> s.reply(TestResponses.header(
        request.opcode(), Wire.Status.FENCED, request.requestId(), 0));
    try (FakeServer a = new FakeServer(0, drain);
        FakeServer b = new FakeServer(0, drain);
        FlurryClient flurry = client(a, b).attempts(4).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.DRAINING, e.code(), e.getMessage());
      assertEquals("no server could serve the request after 4 attempts: " + a.address()
          + " answered FENCED 2 times (draining: its operator is stopping it); " + b.address()
          + " answered FENCED 2 times (draining: its operator is stopping it)", e.getMessage());
      assertEquals(4, flurry.counters().fenced());
    }
    // One draining server and one that holds no node id: FENCED, each named for what it said.
    try (FakeServer a = new FakeServer(0, drain);
        FakeServer b = new FakeServer(0, lost);
        FlurryClient flurry = client(a, b).attempts(2).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.FENCED, e.code(), e.getMessage());
      assertEquals("no server could serve the request after 2 attempts: " + a.address()
          + " answered FENCED once (draining: its operator is stopping it); " + b.address()
          + " answered FENCED once (it holds no node id: lost, or not yet claimed)",
          e.getMessage());
    }
  }

  // EXHAUSTED: the layout's time (GET_IDS) or the sequence (GET_SEQ) has run out: the call
  // fails at once, asking no other server and using no other attempt.
  @Test
  void exhaustedFailsAtOnceAskingNoOtherServer() throws Exception {
    final FakeServer.Handler exhausted = (s, request, index) -> s.reply(TestResponses.header(
        request.opcode(), Wire.Status.EXHAUSTED, request.requestId(), 0));
    try (FakeServer a = new FakeServer(0, exhausted);
        FakeServer b = FakeServer.issuing(100, 4096, 3);
        FlurryClient flurry = client(a, b).attempts(5).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(10));
      assertEquals(FlurryException.Code.EXHAUSTED, e.code(), e.getMessage());
      assertEquals(a.address() + " answered EXHAUSTED to GET_IDS: the ID layout's time field"
          + " has run out (its last instant has passed): no server of this layout can issue IDs"
          + " again; a new layout or epoch is needed", e.getMessage());
      final FlurryException seq = assertThrows(FlurryException.class,
          () -> flurry.getSeq("orders", 1));
      assertEquals(FlurryException.Code.EXHAUSTED, seq.code(), seq.getMessage());
      assertEquals(a.address() + " answered EXHAUSTED to GET_SEQ: the sequence 'orders' has"
          + " reached 2^63 and can issue no number again", seq.getMessage());
      assertEquals(2, a.requests().size());
      assertEquals(0, b.requests().size(), "EXHAUSTED asked another server");
      assertEquals(2, flurry.counters().requests());
      assertEquals(0, flurry.counters().idsReceived());
    }
  }

  // A well-formed OK answer with the outstanding request id, sent from another address (port)
  // before the real answer, is never taken: the socket is connected to the server asked, so
  // the kernel drops it. (An unconnected socket would read it and take its IDs.)
  @Test
  void anAnswerFromAnotherAddressIsNeverTaken() throws Exception {
    final long forgedFirst = Layout.snowflake().compose(1000, 99, 0, 0);
    try (FakeServer server = new FakeServer(5000, (s, request, index) -> {
          s.forge(TestResponses.encode(request.opcode(), 0, 99, request.requestId(), 0,
              List.of(new Wire.Range(forgedFirst, request.count())), null), 20);
          s.answerIds(request, 4096, 3);
        });
        FlurryClient flurry = client(server).build()) {
      for (int call = 0; call < 5; ++call) {
        final long[] ids = flurry.get(5);
        assertConsecutive(ids, 5000 + 6L * call);
        for (long id : ids) assertTrue(id < forgedFirst, "a forged ID was taken: " + id);
      }
      final Counters counters = flurry.counters();
      assertEquals(0, counters.ignoredResponses() + counters.malformedResponses(),
          "a datagram from another address reached the client: " + counters);
      assertEquals(5, counters.requests());
    }
  }

  // Request ids come from SecureRandom: 500 attempts' ids are distinct, none follows another
  // by one (a counter lets anyone who saw one request answer the next ones ahead of time), and
  // about half their bits are set.
  @Test
  void requestIdsAreUnpredictable() throws Exception {
    try (FakeServer server = FakeServer.issuing(0, 4096, 3);
        FlurryClient flurry = client(server).build()) {
      for (int i = 0; i < 500; ++i) flurry.get(1);
      final List<FakeServer.Request> requests = server.requests();
      assertEquals(500, requests.size());
      final Set<Long> distinct = new HashSet<>();
      long ones = 0;
      for (int i = 0; i < requests.size(); ++i) {
        final long id = requests.get(i).requestId();
        distinct.add(id);
        ones += Long.bitCount(id);
        if (i > 0) {
          assertTrue(id != requests.get(i - 1).requestId() + 1, "consecutive request ids at " + i);
        }
      }
      assertEquals(500, distinct.size(), "a request id repeated");
      // 32,000 bits, half of them set: a random source gives 16,000 +- a few hundred (the
      // bound is 10 standard deviations).
      assertTrue(Math.abs(ones - 16_000) < 900, ones + " bits set of 32,000");
    }
    // And the ids of one client are not those of another (no shared seed or start).
    final Exchange.RequestIds a = new Exchange.RequestIds();
    final Exchange.RequestIds b = new Exchange.RequestIds();
    final Set<Long> seen = new HashSet<>();
    for (int i = 0; i < 200; ++i) {
      assertTrue(seen.add(a.next()));
      assertTrue(seen.add(b.next()));
    }
  }

  @Test
  void timeoutMovesToTheNextServer() throws Exception {
    try (FakeServer dead = FakeServer.silent();
        FakeServer good = FakeServer.issuing(7000, 4096, 3);
        FlurryClient flurry = client(dead, good).timeout(Duration.ofMillis(SILENT_TIMEOUT_MS))
            .build()) {
      final long start = System.nanoTime();
      assertConsecutive(flurry.get(4), 7000);
      // A lower bound: a slow machine only makes the call take longer.
      assertTrue(System.nanoTime() - start >= SILENT_TIMEOUT_MS * MS, "the timeout was not waited");
      assertConsecutive(flurry.get(1), 7005); // the fake server skips one ID after a range
      // The dead server's thread records the request at its own pace.
      assertEquals(1, Eventually.reaches(() -> dead.requests().size(), 1));
      assertEquals(1, flurry.counters().timeouts());
    }
  }

  @Test
  void noAnswerNamesServersAttemptsAndTimeout() throws Exception {
    try (FakeServer a = FakeServer.silent();
        FakeServer b = FakeServer.silent();
        FlurryClient flurry = client(a, b).attempts(3)
            .timeout(Duration.ofMillis(ALL_SILENT_TIMEOUT_MS)).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::ping);
      assertEquals(FlurryException.Code.NO_ANSWER, e.code());
      assertEquals("no answer from " + a.address() + ", " + b.address()
          + " after 3 attempts of " + ALL_SILENT_TIMEOUT_MS + " ms", e.getMessage());
      // Silent servers record requests at their own pace, maybe after the call gave up.
      assertEquals(2, Eventually.reaches(() -> a.requests().size(), 2));
      assertEquals(1, Eventually.reaches(() -> b.requests().size(), 1));
      assertEquals(3, flurry.counters().timeouts());
    }
  }

  // ---- stale and malformed answers ----

  @Test
  void lateAndForeignAnswersAreIgnored() throws Exception {
    final long[] firstId = new long[1];
    try (FakeServer server = new FakeServer(100, (s, request, index) -> {
          if (index == 0) { // no answer in time: the client asks again
            firstId[0] = request.requestId();
            return;
          }
          // The late answer to the first attempt, then a foreign one, then the real one.
          s.reply(TestResponses.ids(firstId[0], List.of(new Wire.Range(1L << 40, 3))));
          s.reply(TestResponses.ids(request.requestId() ^ 0x5a5a, List.of(new Wire.Range(1L << 41, 3))));
          s.answerIds(request, 4096, 3);
        });
        FlurryClient flurry = client(server).timeout(Duration.ofMillis(SILENT_TIMEOUT_MS))
            .build()) {
      assertConsecutive(flurry.get(3), 100);
      assertEquals(2, server.requests().size());
      assertTrue(server.requests().get(0).requestId() != server.requests().get(1).requestId(),
          "a retry reused the request id");
      final Counters counters = flurry.counters();
      assertEquals(2, counters.ignoredResponses());
      assertEquals(0, counters.malformedResponses());
      assertEquals(1, counters.timeouts());
      assertEquals(3, counters.idsReceived());
    }
  }

  /** Every way an answer to the outstanding request can be wrong (rules 1..12, 14, 15). */
  private static List<byte[]> malformedAnswers(long requestId, long count) {
    final byte[] good = TestResponses.ids(requestId, List.of(new Wire.Range(1L << 50, count)));
    final List<UnaryOperator<byte[]>> edits = List.of(
        b -> Arrays.copyOf(b, 19), // too_short
        b -> patch(b, 1, 0x4d), // bad_magic
        b -> Arrays.copyOf(b, Wire.DATAGRAM_SIZE_MAX + 1), // too_long
        b -> patch(b, 2, 2), // bad_version
        b -> patch(b, 3, 0x01), // not_response
        b -> patch(b, 4, 5), // bad_status
        b -> patch(patch(b, 3, 0x84), 5, 0), // bad_opcode (OK to opcode 4)
        b -> TestResponses.header(2, Wire.Status.RETRY, requestId, 0), // status_unexpected
        b -> patch(b, 4, 1), // ranges_unexpected (RETRY with a range)
        b -> TestResponses.encode(1, 0, 5, requestId, 0, List.of(), null), // ranges_missing
        b -> Arrays.copyOf(b, b.length - 1), // bad_length
        b -> TestResponses.ids(requestId, List.of(new Wire.Range(1L << 50, 0))), // bad_range
        b -> TestResponses.ids(requestId, List.of(new Wire.Range(Long.MAX_VALUE - 1, count))),
        b -> TestResponses.ids(requestId, // overlap
            List.of(new Wire.Range(1L << 50, 1), new Wire.Range(1L << 50, 1))),
        b -> TestResponses.header(2, Wire.Status.OK, requestId, 0), // rule 14: PING answer
        b -> TestResponses.ids(requestId, List.of(new Wire.Range(1L << 50, count + 1)))); // 15
    final List<byte[]> out = new ArrayList<>();
    for (UnaryOperator<byte[]> edit : edits) out.add(edit.apply(good.clone()));
    return out;
  }

  private static byte[] patch(byte[] bytes, int offset, int value) {
    bytes[offset] = (byte) value;
    return bytes;
  }

  @Test
  void malformedAnswersAreCountedAndNeverUsed() throws Exception {
    final int[] sent = new int[1];
    try (FakeServer server = new FakeServer(42, (s, request, index) -> {
          final List<byte[]> bad = malformedAnswers(request.requestId(), request.count());
          for (byte[] datagram : bad) s.reply(datagram);
          sent[0] = bad.size();
          s.answerIds(request, 4096, 3);
        });
        FlurryClient flurry = client(server).attempts(1).build()) {
      assertConsecutive(flurry.get(7), 42);
      final Counters counters = flurry.counters();
      assertEquals(16, sent[0]);
      assertEquals(sent[0], counters.malformedResponses());
      assertEquals(0, counters.ignoredResponses());
      assertEquals(1, counters.responses());
      assertEquals(7, counters.idsReceived());
    }
  }

  // ---- batches ----

  @Test
  void partialAnswersAreAskedAgainWithPaddedRequests() throws Exception {
    try (FakeServer server = FakeServer.issuing(1, 7, 2); // at most 14 IDs per answer
        FlurryClient flurry = client(server).idsPerRequest(40).build()) {
      final long[] ids = flurry.get(100);
      assertEquals(100, ids.length);
      assertEquals(100, Arrays.stream(ids).distinct().count());
      long remaining = 100;
      for (FakeServer.Request request : server.requests()) {
        final long count = Math.min(remaining, 40);
        assertEquals(count, request.count(), "asks again for the rest");
        assertEquals(Wire.requestSizeForIds(count, Exchange.IDS_PER_RANGE_ASSUMED),
            request.size(), "padding of a request for " + count);
        remaining -= Math.min(count, 14);
      }
      assertEquals(0, remaining);
      assertEquals(8, flurry.counters().requests()); // ceil(100 / 14)
    }
  }

  @Test
  void paddingFollowsTheSizingRule() {
    assertEquals(31, Wire.requestSizeForIds(20_000, 4096));
    assertEquals(403, Wire.requestSizeForIds(100_000, 1024));
    assertEquals(121, Wire.rangesForIds(1 << 20, 4096));
    assertEquals(3, Wire.rangesMax(20));
    assertEquals(5, Wire.rangesMax(27));
    assertEquals(99, Wire.rangesMax(403));
    assertEquals(121, Wire.rangesMax(491));
    assertEquals(121, Wire.rangesMax(1472));
    for (int ranges = 1; ranges <= 121; ++ranges) {
      assertTrue(Wire.rangesMax(Wire.requestSizeForRanges(ranges)) >= ranges, "" + ranges);
    }
  }

  @Test
  void getZeroSendsNothingAndGetRangesSumsToN() throws Exception {
    try (FakeServer server = FakeServer.issuing(10, 3, 3);
        FlurryClient flurry = client(server).build()) {
      assertEquals(0, flurry.get(0).length);
      assertEquals(0, server.requests().size());
      final List<Wire.Range> ranges = flurry.getRanges(20);
      assertEquals(20, ranges.stream().mapToLong(Wire.Range::count).sum());
      assertThrows(FlurryException.class, () -> flurry.get(FlurryClient.GET_COUNT_MAX + 1));
    }
  }

  // ---- BAD_REQUEST and UNAUTHORIZED end the call ----

  @Test
  void badRequestAndUnauthorizedEndTheCallWithoutFailover() throws Exception {
    try (FakeServer bad = new FakeServer(0, (s, request, index) -> s.reply(TestResponses.header(
            request.opcode(), index == 0 ? Wire.Status.BAD_REQUEST : Wire.Status.UNAUTHORIZED,
            request.requestId(), index == 0 ? 22 : 32)));
        FakeServer good = FakeServer.issuing(0, 4096, 3);
        FlurryClient flurry = client(bad, good).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.BAD_REQUEST, e.code());
      assertEquals(bad.address() + " answered BAD_REQUEST (trailing_bytes) to GET_IDS: the "
          + "server rejects this request; is the client built for another wire version?",
          e.getMessage());
      final FlurryException auth = assertThrows(FlurryException.class, flurry::ping);
      assertEquals(FlurryException.Code.UNAUTHORIZED, auth.code());
      assertTrue(auth.getMessage().contains("(auth_unsupported) to PING"), auth.getMessage());
      assertEquals(0, good.requests().size());
    }
  }

  // ---- ping, info, layout ----

  @Test
  void pingInfoAndLayoutDecodeTheServersIds() throws Exception {
    try (FakeServer server = new FakeServer(0, (s, request, index) -> {
          if (request.opcode() == Wire.Opcode.GET_IDS.code) {
            final long id = Layout.snowflake().compose(31_622_400_000L, 5, 0, 7);
            s.reply(TestResponses.ids(request.requestId(), List.of(new Wire.Range(id, 1))));
          } else {
            s.answerIds(request, 1, 1);
          }
        });
        FlurryClient flurry = client(server).build()) {
      final PingResult ping = flurry.ping();
      assertEquals(server.address(), ping.server());
      assertEquals(5, ping.node());
      assertTrue(ping.rtt().toNanos() > 0);
      assertEquals(12, flurry.info().sequenceBits());
      final Layout.Decoded decoded = flurry.layout().decode(flurry.next());
      assertEquals(new Layout.Decoded(31_622_400_000L, 1_735_689_600_000L, 5, 0, 7), decoded);
      assertEquals("2025-01-01T00:00:00.000Z", decoded.utc());
    }
  }

  @Test
  void aLayoutThatFailsTheRulesIsRefused() throws Exception {
    try (FakeServer server = new FakeServer(0, (s, request, index) -> s.reply(
            TestResponses.encode(request.opcode(), 0, 5, request.requestId(), 0, List.of(),
                new Wire.Info(0, 7, 41, 10, 12, 0, 0, 1)))); // a 7 ms unit
        FlurryClient flurry = client(server).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::layout);
      assertEquals(FlurryException.Code.BAD_LAYOUT, e.code());
      assertTrue(e.getMessage().contains("time unit 7 ms"), e.getMessage());
    }
  }

  // ---- prefetch and close ----

  @Test
  void prefetchServesManyThreadsUniqueIds() throws Exception {
    final int threads = 8;
    final int perThread = 5_000;
    try (FakeServer server = FakeServer.issuing(1, 100, 121);
        FlurryClient flurry = client(server).prefetch(2_000).idsPerRequest(1_000).build()) {
      final ExecutorService pool = Executors.newFixedThreadPool(threads);
      final List<Future<long[]>> results = new ArrayList<>();
      for (int t = 0; t < threads; ++t) {
        results.add(pool.submit(() -> {
          final long[] ids = new long[perThread];
          for (int i = 0; i < perThread; ++i) ids[i] = flurry.next();
          return ids;
        }));
      }
      final List<long[]> all = new ArrayList<>();
      for (Future<long[]> result : results) all.add(result.get(30, TimeUnit.SECONDS));
      pool.shutdown();
      final long[] ids = all.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      assertEquals(threads * perThread, Arrays.stream(ids).distinct().count(), "duplicate IDs");
      // A refill is counted when it has topped the buffer up, which may be after the last
      // next() returned: the refill thread runs at its own pace.
      assertTrue(Eventually.holds(() -> flurry.counters().prefetchRefills() > 0),
          flurry.counters().toString());
      assertEquals(0, flurry.counters().prefetchFailures());
    }
  }

  // Runs `call` on another thread and closes the client once that thread waits: parked on
  // the io lock (behind the refill thread's exchange) or inside Exchange.await (its own
  // exchange, blocked or polling). Checks that the call ends with SHUTTING_DOWN, long before
  // its 30 s attempt timeout, and that the closed client refuses a new call. Returns the
  // client's blocked waits when close() was called.
  private static long assertCloseEndsCall(FlurryClient flurry, FakeServer server,
      Callable<?> call) throws Exception {
    final ExecutorService pool = Executors.newSingleThreadExecutor();
    final long blockedAtClose;
    try {
      final AtomicReference<Thread> caller = new AtomicReference<>();
      final Future<?> waiting = pool.submit(() -> {
        caller.set(Thread.currentThread());
        return call.call();
      });
      assertTrue(Eventually.holds(() -> caller.get() != null && (Eventually.inAwait(caller.get())
          || caller.get().getState() == Thread.State.WAITING)), "the call never waited");
      blockedAtClose = flurry.blockedWaits();
      final long start = System.nanoTime();
      flurry.close();
      final ExecutionException e = assertThrows(ExecutionException.class,
          () -> waiting.get(20, TimeUnit.SECONDS));
      final long tookNanos = System.nanoTime() - start;
      assertTrue(e.getCause() instanceof FlurryException, e.toString());
      assertEquals(FlurryException.Code.SHUTTING_DOWN, ((FlurryException) e.getCause()).code());
      // Not a latency bound: the wait would otherwise last the 30 s attempt timeout, so ending
      // within 10 s shows close() ended it, and no stall on a loaded machine comes near 10 s.
      assertTrue(tookNanos < 10_000 * MS, "close took " + tookNanos / MS + " ms");
      // The silent server's thread records the request at its own pace. (A call queued behind
      // the refill's exchange may send one more while close() is under way: at least one.)
      assertTrue(Eventually.holds(() -> !server.requests().isEmpty()), "the call sent no request");
    } finally {
      pool.shutdownNow();
    }
    assertEquals(FlurryException.Code.SHUTTING_DOWN,
        assertThrows(FlurryException.class, flurry::ping).code());
    return blockedAtClose;
  }

  @Test
  void closeEndsWaitsAtOnce() throws Exception {
    try (FakeServer dead = FakeServer.silent()) {
      final FlurryClient flurry = client(dead).prefetch(100).timeout(Duration.ofSeconds(30))
          .build();
      assertCloseEndsCall(flurry, dead, flurry::next);
    }
  }

  // A waiting call whose thread is interrupted ends (as pause() does) instead of spinning:
  // an interrupted thread's select() returns at once, every time.
  @Test
  void anInterruptEndsAWait() throws Exception {
    try (FakeServer dead = FakeServer.silent();
        FlurryClient flurry = client(dead).timeout(Duration.ofSeconds(30)).build()) {
      final ExecutorService pool = Executors.newSingleThreadExecutor();
      final AtomicReference<Thread> caller = new AtomicReference<>();
      final Future<long[]> waiting = pool.submit(() -> {
        caller.set(Thread.currentThread());
        return flurry.get(1);
      });
      // Interrupted once it waits for the answer (the request is sent by then).
      assertTrue(Eventually.holds(() -> caller.get() != null && Eventually.inAwait(caller.get())),
          "the call never waited");
      pool.shutdownNow(); // interrupts the waiting thread
      final ExecutionException e = assertThrows(ExecutionException.class,
          () -> waiting.get(20, TimeUnit.SECONDS));
      assertTrue(e.getCause() instanceof FlurryException, e.toString());
      assertEquals(FlurryException.Code.SHUTTING_DOWN, ((FlurryException) e.getCause()).code());
      assertEquals("interrupted", e.getCause().getMessage());
      // The client's own count: the server's thread may not have recorded the request yet.
      assertEquals(1, flurry.counters().requests(), "the interrupted call went on asking");
    }
  }

  // ---- polling (Options.poll) ----

  // A waiting call reads without blocking before it blocks. What the client did is counted
  // (Transport's empty looks and blocked waits), never how fast the server was:
  //   * without polling, a look that found nothing is followed by a blocking wait, or, when it
  //     came after a blocking wait, by the end of the attempt (a timeout): empty looks ==
  //     blocked waits + at most one per timed-out attempt;
  //   * with poll POLL_MAX and the attempt timeout no longer than that, every wait of every
  //     attempt ends inside its polling: 0 blocked waits, whatever the machine's speed (an
  //     attempt that times out is asked again; 100 attempts).
  // Without polling the server answers after about 100 us, as one across a network would, so
  // that the first look usually finds nothing; nothing asserted depends on it. The polling
  // client's is answered at once: its attempts last 10 ms, and on a loaded machine a delay
  // per request (parkNanos may sleep far longer) would pile up behind requests already given
  // up on, making the late answers later still.
  @Test
  void pollingFindsAnswersWithoutBlocking() throws Exception {
    final int requests = 500;
    final Set<Long> seen = new HashSet<>();
    final AtomicBoolean delay = new AtomicBoolean(true);
    try (FakeServer server = new FakeServer(1, (s, request, index) -> {
          if (delay.get()) LockSupport.parkNanos(100_000);
          s.answerIds(request, 4096, 3);
        })) {
      final Counters plain;
      final long plainEmpty;
      final long plainBlocked;
      try (FlurryClient flurry = client(server).build()) {
        for (int r = 0; r < requests; ++r) assertTrue(seen.add(flurry.next()), "an ID twice");
        plain = flurry.counters();
        plainEmpty = flurry.emptyLooks();
        plainBlocked = flurry.blockedWaits();
      }
      final Counters polling;
      final long pollingEmpty;
      final long pollingBlocked;
      delay.set(false);
      try (FlurryClient flurry = client(server).poll(Options.POLL_MAX).timeout(Options.POLL_MAX)
          .attempts(Options.ATTEMPTS_MAX).build()) {
        for (int r = 0; r < requests; ++r) assertTrue(seen.add(flurry.next()), "an ID twice");
        polling = flurry.counters();
        pollingEmpty = flurry.emptyLooks();
        pollingBlocked = flurry.blockedWaits();
      }
      System.out.printf("for %d requests: poll 0: %d empty looks, %d blocked waits, %d timeouts;"
          + " poll %d us: %d empty looks, %d blocked waits, %d timeouts%n", requests, plainEmpty,
          plainBlocked, plain.timeouts(), Options.POLL_MAX.toNanos() / 1_000, pollingEmpty,
          pollingBlocked, polling.timeouts());
      assertEquals(2 * requests, seen.size());
      assertEquals(requests, plain.responses());
      assertEquals(requests, polling.responses());
      assertTrue(plainBlocked <= plainEmpty && plainEmpty <= plainBlocked + plain.timeouts(),
          "without polling every empty look must block or end the attempt: " + plainEmpty
              + " empty looks, " + plainBlocked + " blocked waits, " + plain);
      assertEquals(0, pollingBlocked, "the polling client blocked: " + polling);
    }
  }

  // The refill thread's waits block whatever Options.poll says: no caller waits on them. A
  // client with poll POLL_MAX that no caller uses: its only exchanges are the refill thread's
  // first fill (1024 IDs, 16 a request: 64 requests). Counted as in the polling test above,
  // never timed: every look that found nothing is followed by a blocking wait or by the end
  // of its attempt, as without polling (a polling wait would look many times, not blocking).
  @Test
  void theRefillThreadNeverPolls() throws Exception {
    try (FakeServer server = new FakeServer(1, (s, request, index) -> {
          LockSupport.parkNanos(100_000); // so that the first look usually finds nothing
          s.answerIds(request, 4096, 3);
        });
        FlurryClient flurry = client(server).poll(Options.POLL_MAX).prefetch(1024)
            .idsPerRequest(16).build()) {
      // The refill thread fills at once, at its own pace; nothing here calls next().
      assertTrue(Eventually.holds(() -> flurry.counters().prefetchRefills() >= 1),
          flurry.counters().toString());
      final Counters counters = flurry.counters();
      final long empty = flurry.emptyLooks();
      final long blocked = flurry.blockedWaits();
      System.out.println("refill thread: " + empty + " empty looks, " + blocked
          + " blocked waits, " + counters);
      assertEquals(1024, counters.idsReceived(), counters.toString());
      assertTrue(blocked <= empty && empty <= blocked + counters.timeouts(),
          "the refill thread polled: " + empty + " empty looks, " + blocked + " blocked waits, "
              + counters);
    }
  }

  @Test
  void closeEndsAPollingCall() throws Exception {
    try (FakeServer dead = FakeServer.silent()) {
      final FlurryClient flurry = client(dead).poll(Options.POLL_MAX)
          .timeout(Duration.ofSeconds(30)).build();
      // Closed as soon as the call waits: inside its 10 ms of polling, most likely; either
      // way the call must end (which phase it was in is reported, not asserted).
      final long blocked = assertCloseEndsCall(flurry, dead, () -> flurry.get(1));
      System.out.println("closed while " + (blocked == 0 ? "polling" : "blocked"));
    }
  }

  @Test
  void pollOutOfBoundsIsRefusedNamingItsBounds() throws Exception {
    final String[] messages = {"poll -1 ms is out of range 0..10 ms",
        "poll 10001 us is out of range 0..10 ms", "poll null is out of range 0..10 ms"};
    final Duration[] polls = {Duration.ofMillis(-1), Options.POLL_MAX.plusNanos(1_000), null};
    for (int i = 0; i < polls.length; ++i) {
      final FlurryException e = assertThrows(FlurryException.class,
          FlurryClient.builder().poll(polls[i])::build);
      assertEquals(FlurryException.Code.INVALID_ARGUMENT, e.code());
      assertEquals(messages[i], e.getMessage());
    }
    FlurryClient.builder().poll(Options.POLL_MAX).build().close();
  }

  // ---- NOT_OWNER: a monotonic sequence served by one node of a cluster ----

  /** Three nodes (1, 2, 3) of the monotonic sequence "ledger" that node `owner` serves. */
  private static final class SeqCluster implements AutoCloseable {
    final FakeServer[] nodes = new FakeServer[3];

    SeqCluster(long owner) throws SocketException {
      for (int i = 0; i < nodes.length; ++i) {
        nodes[i] = FakeServer.monotonic("ledger", i + 1, owner);
      }
    }

    /** A client of the nodes at these indexes, in this order. */
    FlurryClient.Builder client(int... indexes) {
      final FakeServer[] listed = new FakeServer[indexes.length];
      for (int i = 0; i < indexes.length; ++i) listed[i] = nodes[indexes[i]];
      return BehaviourTest.client(listed);
    }

    int notOwnerAnswers() {
      int n = 0;
      for (FakeServer node : nodes) n += node.notOwnerAnswers();
      return n;
    }

    void moveTo(long owner) {
      for (FakeServer node : nodes) node.setSequenceOwner(owner);
    }

    int[] requestsPerNode() {
      final int[] out = new int[nodes.length];
      for (int i = 0; i < nodes.length; ++i) out[i] = nodes[i].requests().size();
      return out;
    }

    @Override
    public void close() {
      for (FakeServer node : nodes) node.close();
    }
  }

  @Test
  void notOwnerIsFollowedToTheNamedNode() throws Exception {
    // Node 3 is last in the list: the first call asks node 1 (NOT_OWNER, node 3), has not heard
    // from node 3 yet, asks node 2 (NOT_OWNER again), then node 3, which serves.
    try (SeqCluster cluster = new SeqCluster(3);
        FlurryClient flurry = cluster.client(0, 1, 2).build()) {
      assertArrayEquals(new long[] {1, 2, 3, 4, 5}, flurry.getSeq("ledger", 5));
      assertEquals(2, cluster.notOwnerAnswers());
      // The client stays with the owner: no more NOT_OWNER.
      assertArrayEquals(new long[] {6, 7, 8}, flurry.getSeq("ledger", 3));
      assertEquals(2, cluster.notOwnerAnswers());
    }
  }

  @Test
  void notOwnerGoesStraightToAServerKnownAsTheOwner() throws Exception {
    try (SeqCluster cluster = new SeqCluster(2);
        FlurryClient flurry = cluster.client(0, 1, 2).build()) {
      assertArrayEquals(new long[] {1}, flurry.getSeq("ledger", 1)); // node 1, then node 2
      assertEquals(1, cluster.notOwnerAnswers());
      // The sequence moves to node 1: node 2 now names it, and node 1 answered before, so the
      // client goes back to it directly (not on to node 3).
      cluster.moveTo(1);
      assertArrayEquals(new long[] {1}, flurry.getSeq("ledger", 1));
      assertEquals(1, cluster.nodes[1].notOwnerAnswers());
      assertEquals(0, cluster.nodes[2].requests().size(), "node 3 was never asked");
    }
  }

  @Test
  void notOwnerOfANodeOutsideTheListFailsNamingIt() throws Exception {
    try (SeqCluster cluster = new SeqCluster(3);
        FlurryClient flurry = cluster.client(0, 1).build()) { // node 3 is not in the list
      final FlurryException e =
          assertThrows(FlurryException.class, () -> flurry.getSeq("ledger", 1));
      assertEquals(FlurryException.Code.NOT_OWNER, e.code(), e.getMessage());
      assertTrue(e.getMessage().contains(
          "node 3 does, and none of this client's servers answers as that node"), e.getMessage());
      assertArrayEquals(new int[] {1, 1, 0}, cluster.requestsPerNode(),
          "each server asked once, then the call gives up");
    }
  }

  @Test
  void noOwnerKnownWaitsWithinTheBudgetThenUsesTheAttempts() throws Exception {
    // Four waits of 50 ms fit the 200 ms budget without using an attempt, then the attempts.
    try (SeqCluster cluster = new SeqCluster(Wire.NOT_OWNER_UNKNOWN);
        FlurryClient flurry = cluster.client(0, 1).attempts(4)
            .retryBudget(Duration.ofMillis(200)).build()) {
      final long start = System.nanoTime();
      final FlurryException e =
          assertThrows(FlurryException.class, () -> flurry.getSeq("ledger", 1));
      final long tookNanos = System.nanoTime() - start;
      assertTrue(tookNanos >= 200 * MS, "gave up after " + tookNanos / MS + " ms");
      assertEquals(FlurryException.Code.NOT_OWNER, e.code(), e.getMessage());
      assertEquals("no server could serve the request after 4 attempts: "
          + cluster.nodes[0].address() + " answered NOT_OWNER 4 times (no owner known); "
          + cluster.nodes[1].address() + " answered NOT_OWNER 4 times (no owner known)",
          e.getMessage());
      assertEquals(8, cluster.notOwnerAnswers());
      // Once an owner is chosen the next call finds it.
      cluster.moveTo(2);
      assertArrayEquals(new long[] {1, 2}, flurry.getSeq("ledger", 2));
    }
  }

  @Test
  void anOwnerChosenDuringTheWaitIsFound() throws Exception {
    final ExecutorService pool = Executors.newSingleThreadExecutor();
    // A budget far beyond any scheduling delay: the client waits (50 ms at a time) until the
    // owner is chosen, however late the choosing thread runs.
    try (SeqCluster cluster = new SeqCluster(Wire.NOT_OWNER_UNKNOWN);
        FlurryClient flurry = cluster.client(0).retryBudget(Duration.ofSeconds(30)).build()) {
      // Node 1 names itself: restarted inside its lease, its old owner key not yet expired.
      cluster.nodes[0].setSequenceOwner(1, false);
      // Chosen once the client has waited through two NOT_OWNER answers.
      final Future<Boolean> chosen = pool.submit(() -> {
        final boolean waited = Eventually.holds(() -> cluster.notOwnerAnswers() >= 2);
        cluster.nodes[0].setSequenceOwner(1);
        return waited;
      });
      final long[] numbers = flurry.getSeq("ledger", 3);
      assertTrue(chosen.get(), cluster.notOwnerAnswers() + " NOT_OWNER before the deadline");
      assertArrayEquals(new long[] {1, 2, 3}, numbers);
      assertTrue(cluster.notOwnerAnswers() >= 2, cluster.notOwnerAnswers() + " NOT_OWNER");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aFencedServersOldNodeIdIsNotTakenForTheOwner() throws Exception {
    // A lost node 7 (FENCED, its header still says 7); the third server is node 7 now and owns
    // the sequence.
    try (SeqCluster cluster = new SeqCluster(7);
        FakeServer oldSeven = FakeServer.monotonic("ledger", 7, 7);
        FakeServer newSeven = FakeServer.monotonic("ledger", 7, 7);
        FlurryClient flurry = client(oldSeven, cluster.nodes[1], newSeven).build()) {
      oldSeven.fence();
      assertArrayEquals(new long[] {1, 2}, flurry.getSeq("ledger", 2));
      assertEquals(1, oldSeven.fencedAnswers(), "asked once, never as the owner");
    }
  }

  @Test
  void anEarlierCallsRecordsDoNotEndACallEarly() throws Exception {
    try (SeqCluster cluster = new SeqCluster(3);
        FlurryClient flurry = cluster.client(0, 1).build()) { // node 3 is not in the list
      assertThrows(FlurryException.class, () -> flurry.getSeq("ledger", 1));
      assertEquals(2, cluster.notOwnerAnswers());
      // The second call asks both again (either may be node 3 by now), not only the one it
      // starts on.
      final FlurryException e =
          assertThrows(FlurryException.class, () -> flurry.getSeq("ledger", 1));
      assertEquals(FlurryException.Code.NOT_OWNER, e.code(), e.getMessage());
      assertEquals(4, cluster.notOwnerAnswers());
    }
  }

  @Test
  void unknownSequenceEndsTheCallAndBadNamesAreRefused() throws Exception {
    try (SeqCluster cluster = new SeqCluster(1);
        FlurryClient flurry = cluster.client(0, 1, 2).build()) {
      final FlurryException e =
          assertThrows(FlurryException.class, () -> flurry.getSeq("tickets", 1));
      assertEquals(FlurryException.Code.UNKNOWN_SEQUENCE, e.code(), e.getMessage());
      assertEquals(cluster.nodes[0].address()
          + " has no sequence 'tickets' (flurryctl seq create tickets)", e.getMessage());
      assertArrayEquals(new int[] {1, 0, 0}, cluster.requestsPerNode());
      for (String name : new String[] {"", "x".repeat(33), "no spaces", "caf\u00e9", null}) {
        final FlurryException bad =
            assertThrows(FlurryException.class, () -> flurry.getSeq(name, 1));
        assertEquals(FlurryException.Code.INVALID_ARGUMENT, bad.code(), bad.getMessage());
      }
    }
  }

  // ---- options ----

  @Test
  void optionsOutOfBoundsAreRefused() {
    final List<FlurryClient.Builder> bad = List.of(
        FlurryClient.builder().servers(List.of()),
        FlurryClient.builder().servers("127.0.0.1"),
        FlurryClient.builder().servers("127.0.0.1:0"),
        FlurryClient.builder().servers("127.0.0.1:65536"),
        FlurryClient.builder().timeout(Duration.ZERO),
        FlurryClient.builder().timeout(Duration.ofSeconds(61)),
        FlurryClient.builder().attempts(0),
        FlurryClient.builder().attempts(101),
        FlurryClient.builder().idsPerRequest(0),
        FlurryClient.builder().idsPerRequest(Wire.COUNT_MAX + 1),
        FlurryClient.builder().prefetch(1),
        FlurryClient.builder().prefetch((1 << 24) + 1),
        FlurryClient.builder().retryWaitMax(Duration.ZERO),
        FlurryClient.builder().retryBudget(Duration.ofMillis(-1)),
        FlurryClient.builder().poll(Duration.ofNanos(-1)),
        FlurryClient.builder().poll(Options.POLL_MAX.plusNanos(1)));
    for (FlurryClient.Builder builder : bad) {
      final FlurryException e = assertThrows(FlurryException.class, builder::build);
      assertEquals(FlurryException.Code.INVALID_ARGUMENT, e.code(), e.getMessage());
    }
  }

  @Test
  void requestsAreEncodedAsTheProtocolSays() throws Exception {
    try (FakeServer server = FakeServer.issuing(0, 4096, 3);
        FlurryClient flurry = client(server).build()) {
      flurry.ping();
      flurry.info();
      flurry.get(20_000);
      final List<FakeServer.Request> requests = server.requests();
      assertEquals(Wire.Opcode.PING.code, requests.get(0).opcode());
      assertEquals(0, requests.get(0).count());
      assertEquals(20, requests.get(0).size());
      assertEquals(Wire.Opcode.INFO.code, requests.get(1).opcode());
      assertEquals(4096, requests.get(2).count()); // idsPerRequest default
      assertEquals(75, requests.get(2).size()); // ceil(4096 / 256) + 1 = 17 ranges
    }
  }
}
