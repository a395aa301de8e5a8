// client/java/.../BehaviourTest.java — the client's behaviour against FakeServer (real UDP on
// 127.0.0.1, answers scripted per request): RETRY back-off honours the hint within its bounds
// and budget, FENCED and timeouts move to the next server, late and foreign answers are
// ignored, every malformed answer is counted and never used, partial answers are asked
// again with the padding rule, BAD_REQUEST / UNAUTHORIZED end the call, ping / info / layout,
// prefetch, close, interrupts, polling (Options.poll), option checks, and GET_SEQ following
// NOT_OWNER to the node that owns a monotonic sequence. Every wait is bounded by the client's
// own timeouts.
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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Tag("behaviour")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BehaviourTest {
  private static final long MS = 1_000_000;
  // Long enough that a loaded machine (2 shared cores) does not turn an answer into a timeout,
  // short enough that the tests of silent servers stay quick.
  private static final long TIMEOUT_MS = 250;

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
    final long[] hints = {10_000_000, 0}; // 10 s: capped to 30 ms; 0: at least 50 µs
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
      assertTrue(capped >= 30 * MS && capped < 2_000 * MS, "capped wait " + capped);
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
        FlurryClient flurry = client(a, b).attempts(4).build()) {
      final FlurryException e = assertThrows(FlurryException.class, () -> flurry.get(1));
      assertEquals(FlurryException.Code.FENCED, e.code());
      assertEquals("no server could serve the request after 4 attempts: " + a.address()
          + " answered FENCED 2 times (it lost its node id); " + b.address()
          + " gave no answer within " + TIMEOUT_MS + " ms 2 times", e.getMessage());
      assertEquals(2, flurry.counters().fenced());
      assertEquals(2, flurry.counters().timeouts());
      // PING is answered by a fenced server: no failover for it.
      assertEquals(a.address(), flurry.ping().server());
    }
  }

  @Test
  void timeoutMovesToTheNextServer() throws Exception {
    try (FakeServer dead = FakeServer.silent();
        FakeServer good = FakeServer.issuing(7000, 4096, 3);
        FlurryClient flurry = client(dead, good).build()) {
      final long start = System.nanoTime();
      assertConsecutive(flurry.get(4), 7000);
      assertTrue(System.nanoTime() - start >= TIMEOUT_MS * MS, "the timeout was not waited");
      assertConsecutive(flurry.get(1), 7005); // the fake server skips one ID after a range
      assertEquals(1, dead.requests().size());
      assertEquals(1, flurry.counters().timeouts());
    }
  }

  @Test
  void noAnswerNamesServersAttemptsAndTimeout() throws Exception {
    try (FakeServer a = FakeServer.silent();
        FakeServer b = FakeServer.silent();
        FlurryClient flurry = client(a, b).attempts(3).build()) {
      final FlurryException e = assertThrows(FlurryException.class, flurry::ping);
      assertEquals(FlurryException.Code.NO_ANSWER, e.code());
      assertEquals("no answer from " + a.address() + ", " + b.address()
          + " after 3 attempts of " + TIMEOUT_MS + " ms", e.getMessage());
      assertEquals(2, a.requests().size());
      assertEquals(1, b.requests().size());
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
        FlurryClient flurry = client(server).build()) {
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
        FlurryClient flurry = client(server).attempts(1).timeout(Duration.ofSeconds(2)).build()) {
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
      assertTrue(flurry.counters().prefetchRefills() > 0);
      assertEquals(0, flurry.counters().prefetchFailures());
    }
  }

  // Runs `call` on another thread, closes the client `delayMs` after `server` saw its first
  // request (the call, or the refill it queues behind, is waiting for an answer that never
  // comes), and checks that the call ends with SHUTTING_DOWN within 2 s of close(), and that
  // the closed client refuses a new call.
  private static void assertCloseEndsCall(FlurryClient flurry, FakeServer server,
      Callable<?> call, long delayMs) throws Exception {
    final ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      final Future<?> waiting = pool.submit(call);
      final long deadline = System.nanoTime() + 5_000 * MS;
      while (server.requests().isEmpty() && System.nanoTime() < deadline) Thread.onSpinWait();
      assertEquals(1, server.requests().size(), "the call sent no request");
      Thread.sleep(delayMs);
      final long start = System.nanoTime();
      flurry.close();
      final Exception e = assertThrows(Exception.class, () -> waiting.get(5, TimeUnit.SECONDS));
      assertTrue(e.getCause() instanceof FlurryException, e.toString());
      assertEquals(FlurryException.Code.SHUTTING_DOWN, ((FlurryException) e.getCause()).code());
      assertTrue(System.nanoTime() - start < 2_000 * MS, "close took too long");
    } finally {
      pool.shutdownNow();
    }
    assertEquals(FlurryException.Code.SHUTTING_DOWN,
        assertThrows(FlurryException.class, flurry::ping).code());
  }

  @Test
  void closeEndsWaitsAtOnce() throws Exception {
    try (FakeServer dead = FakeServer.silent()) {
      final FlurryClient flurry = client(dead).prefetch(100).timeout(Duration.ofSeconds(30))
          .build();
      assertCloseEndsCall(flurry, dead, flurry::next, 100);
    }
  }

  // A waiting call whose thread is interrupted ends (as pause() does) instead of spinning:
  // an interrupted thread's select() returns at once, every time.
  @Test
  void anInterruptEndsAWait() throws Exception {
    try (FakeServer dead = FakeServer.silent();
        FlurryClient flurry = client(dead).timeout(Duration.ofSeconds(30)).build()) {
      final ExecutorService pool = Executors.newSingleThreadExecutor();
      final Future<long[]> waiting = pool.submit(() -> flurry.get(1));
      final long deadline = System.nanoTime() + 5_000 * MS;
      while (dead.requests().isEmpty() && System.nanoTime() < deadline) Thread.onSpinWait();
      Thread.sleep(50);
      pool.shutdownNow(); // interrupts the waiting thread
      final Exception e = assertThrows(Exception.class, () -> waiting.get(5, TimeUnit.SECONDS));
      assertTrue(e.getCause() instanceof FlurryException, e.toString());
      assertEquals(FlurryException.Code.SHUTTING_DOWN, ((FlurryException) e.getCause()).code());
      assertEquals("interrupted", e.getCause().getMessage());
      assertEquals(1, dead.requests().size(), "the interrupted call went on asking");
    }
  }

  // ---- polling (Options.poll) ----

  // A waiting call reads without blocking before it blocks. The same 500 single requests to
  // the same server, without and with polling, counting the waits that blocked in the
  // transport's selector: without, nearly every wait blocks; with POLL_MAX, a server in this
  // process answers well within it. The server answers after about 100 us, as a real one
  // across a network would: answering at once, it often beat the client's first look (a
  // third of the waits never blocked, polling or not).
  @Test
  void pollingFindsAnswersWithoutBlocking() throws Exception {
    final int requests = 500;
    final Duration[] polls = {Duration.ZERO, Options.POLL_MAX};
    final long[] blocked = new long[polls.length];
    final Set<Long> seen = new HashSet<>();
    try (FakeServer server = new FakeServer(1, (s, request, index) -> {
          LockSupport.parkNanos(100_000);
          s.answerIds(request, 4096, 3);
        })) {
      for (int i = 0; i < polls.length; ++i) {
        try (FlurryClient flurry = client(server).poll(polls[i]).build()) {
          for (int r = 0; r < requests; ++r) assertTrue(seen.add(flurry.next()), "an ID twice");
          assertEquals(requests, flurry.counters().responses());
          blocked[i] = flurry.blockedWaits();
        }
      }
    }
    System.out.printf("blocked waits for %d requests: poll 0: %d, poll %d us: %d%n", requests,
        blocked[0], Options.POLL_MAX.toNanos() / 1_000, blocked[1]);
    assertTrue(blocked[0] >= requests * 9 / 10, "without polling nearly every wait blocks: "
        + blocked[0]);
    assertTrue(blocked[1] <= requests / 20, "with polling few waits block: " + blocked[1]);
  }

  // The refill thread's waits block whatever Options.poll says: no caller waits on them.
  // Each round takes the buffer below half and waits for the refill (two or more requests).
  @Test
  void theRefillThreadNeverPolls() throws Exception {
    final int rounds = 5;
    try (FakeServer server = FakeServer.issuing(1, 4096, 3);
        FlurryClient flurry = client(server).poll(Options.POLL_MAX).prefetch(64)
            .idsPerRequest(16).build()) {
      for (int round = 1; round <= rounds; ++round) {
        final long deadline = System.nanoTime() + 5_000 * MS;
        // next() also wakes the refill thread again should a wake have come too early.
        while (flurry.counters().prefetchRefills() < round && System.nanoTime() < deadline) {
          flurry.next();
          Thread.sleep(1);
        }
        for (int i = 0; i < 40; ++i) flurry.next();
      }
      final Counters counters = flurry.counters();
      assertTrue(counters.prefetchRefills() >= rounds, counters.toString());
      assertTrue(flurry.blockedWaits() >= counters.prefetchRefills(),
          "the refill thread polled: " + flurry.blockedWaits() + " blocked waits, " + counters);
    }
  }

  @Test
  void closeEndsAPollingCall() throws Exception {
    try (FakeServer dead = FakeServer.silent()) {
      final FlurryClient flurry = client(dead).poll(Options.POLL_MAX)
          .timeout(Duration.ofSeconds(30)).build();
      // Closed as soon as the request arrives: inside the 10 ms of polling, most likely.
      assertCloseEndsCall(flurry, dead, () -> flurry.get(1), 0);
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
    try (SeqCluster cluster = new SeqCluster(Wire.NOT_OWNER_UNKNOWN);
        FlurryClient flurry = cluster.client(0).build()) {
      // Node 1 names itself: restarted inside its lease, its old owner key not yet expired.
      cluster.nodes[0].setSequenceOwner(1, false);
      final Future<?> chosen = pool.submit(() -> {
        LockSupport.parkNanos(150 * MS);
        cluster.nodes[0].setSequenceOwner(1);
      });
      final long[] numbers = flurry.getSeq("ledger", 3);
      chosen.get();
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
