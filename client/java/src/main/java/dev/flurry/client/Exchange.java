// client/java/.../Exchange.java — internal: one request/answer with failover, RETRY back-off
// and answer validation (the C++ client/exchange.cc, rule for rule).
//
// Contract:
//   * Every datagram sent carries a fresh request id. An answer is accepted only if it passes
//     Wire.decodeResponse (rules 1..12), echoes the outstanding request id (13) and is
//     consistent with the request (14, 15: same opcode, never more IDs than asked). A datagram
//     failing 13 counts as ignoredResponses, one failing any other rule as malformedResponses;
//     either way nothing from it is used and the attempt keeps waiting until its deadline.
//   * RETRY sleeps the server's hint clamped to 50 µs..retryWaitMax and asks the same server
//     again without using an attempt, until retryBudget of sleeping would be exceeded
//     (RETRY_EXHAUSTED). A timeout, a failed send and FENCED use an attempt and move to the
//     next server (wrapping). BAD_REQUEST and UNAUTHORIZED end the exchange.
//   * With Options.poll, a wait reads the socket without blocking for up to `poll` before it
//     blocks, unless pollAnswers(false) (the prefetch refill thread: no caller waits on it).
//   * Not thread-safe: the caller serializes run() and fetch() (FlurryClient's io lock).
//     counters() may be read from any thread.
package dev.flurry.client;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLongArray;

final class Exchange {
  /** A RETRY hint of 0 must not turn into a busy loop. */
  static final long RETRY_WAIT_MIN_NANOS = 50_000;
  /** After a send that fails at once, so the attempts are not spun through. */
  static final long SEND_FAILURE_PAUSE_NANOS = 1_000_000;
  /**
   * A conservative guess of how many IDs one range carries (a 12-bit sequence shared by 16
   * workers, or js-safe's 11 bits shared by 8), as the C++ client assumes. It only sizes the
   * padding: a server with smaller slices answers with fewer IDs and the client asks again.
   */
  static final long IDS_PER_RANGE_ASSUMED = 256;

  enum Count {
    REQUESTS, RESPONSES, RETRIES, TIMEOUTS, FENCED, IGNORED_RESPONSES, MALFORMED_RESPONSES,
    SEND_ERRORS, IDS_RECEIVED
  }

  private enum Kind { TIMEOUT, FENCED, SEND_FAILED }

  private record Failure(Kind kind, int server, String reason) {}

  private final Options options;
  private final Transport transport;
  private final AtomicLongArray counters = new AtomicLongArray(Count.values().length);
  private final byte[] sendBuffer = new byte[Wire.DATAGRAM_SIZE_MAX];
  // One byte more than any valid datagram, so an oversize one is seen as such.
  private final byte[] receiveBuffer = new byte[Wire.DATAGRAM_SIZE_MAX + 1];
  private final List<Failure> failures = new ArrayList<>();
  private int current; // the server asked first; moves on timeout, failed send, FENCED
  // Random start: a stray answer meant for an earlier process on the same port is not ours.
  private long nextRequestId = ThreadLocalRandom.current().nextLong();
  private long retryWaitedNanos;
  private boolean pollAnswers = true;
  private Wire.Response answer;
  private int answerServer;
  private long rttNanos;

  Exchange(Options options, Transport transport) {
    this.options = options;
    this.transport = transport;
  }

  /** Whether waits poll (Options.poll); the refill thread turns it off for its exchanges. */
  void pollAnswers(boolean on) {
    pollAnswers = on;
  }

  void bump(Count count, long n) {
    counters.addAndGet(count.ordinal(), n);
  }

  long count(Count count) {
    return counters.get(count.ordinal());
  }

  /** The accepted OK answer of the last run(). */
  Wire.Response answer() {
    return answer;
  }

  String answerServerName() {
    return transport.name(answerServer);
  }

  long rttNanos() {
    return rttNanos;
  }

  /** One exchange; returns the accepted OK answer, or throws naming why there is none. */
  Wire.Response run(Wire.Opcode opcode, long count, int paddedSize) throws FlurryException {
    failures.clear();
    retryWaitedNanos = 0;
    int attempt = 0;
    while (attempt < options.attempts()) {
      if (attemptOnce(opcode, count, paddedSize)) return answer;
      if (answer == null) { // timeout, failed send or FENCED: the next server
        current = (current + 1) % transport.serverCount();
        ++attempt;
      } // else RETRY, slept already: the same server, the attempt is not used up
    }
    throw failAttempts();
  }

  // Sends one request to the current server and waits for its answer. True on OK; false with
  // answer == null to move on, with answer != null (a RETRY) to ask the same server again.
  private boolean attemptOnce(Wire.Opcode opcode, long count, int paddedSize)
      throws FlurryException {
    answer = null;
    final int server = current;
    final long requestId = nextRequestId++;
    final int size = Wire.encodeRequest(opcode.code, 0, count, requestId, paddedSize, sendBuffer);
    final long sent = System.nanoTime();
    bump(Count.REQUESTS, 1);
    final String sendError = transport.send(server, sendBuffer, size);
    if (sendError != null) {
      bump(Count.SEND_ERRORS, 1);
      failures.add(new Failure(Kind.SEND_FAILED, server, sendError));
      transport.pause(SEND_FAILURE_PAUSE_NANOS);
      return false;
    }
    final Wire.Response accepted = await(opcode.code, count, requestId, sent + options.timeout().toNanos());
    if (accepted == null) {
      bump(Count.TIMEOUTS, 1);
      failures.add(new Failure(Kind.TIMEOUT, server, null));
      return false;
    }
    bump(Count.RESPONSES, 1);
    answerServer = server;
    switch (Wire.Status.of(accepted.status())) {
      case OK -> {
        rttNanos = System.nanoTime() - sent;
        answer = accepted;
        return true;
      }
      case RETRY -> {
        onRetry(accepted, server);
        answer = accepted;
        return false;
      }
      case FENCED -> {
        bump(Count.FENCED, 1);
        failures.add(new Failure(Kind.FENCED, server, null));
        return false;
      }
      default -> throw reject(opcode, accepted, server);
    }
  }

  // Sleeps the server's hint (bounded) unless the budget would be exceeded.
  private void onRetry(Wire.Response retry, int server) throws FlurryException {
    bump(Count.RETRIES, 1);
    final long hintNanos = Math.min(retry.detail(), Long.MAX_VALUE / 1000) * 1000;
    final long waitNanos =
        Math.max(RETRY_WAIT_MIN_NANOS, Math.min(hintNanos, options.retryWaitMax().toNanos()));
    if (retryWaitedNanos + waitNanos > options.retryBudget().toNanos()) {
      throw new FlurryException(FlurryException.Code.RETRY_EXHAUSTED,
          transport.name(server) + " kept answering RETRY for " + retryWaitedNanos / 1_000_000
              + " ms (budget " + options.retryBudget().toMillis()
              + " ms): its issue ceiling is not rising; is its watermark store or etcd stalled?");
    }
    transport.pause(waitNanos);
    retryWaitedNanos += waitNanos;
  }

  // BAD_REQUEST or UNAUTHORIZED: another server would reject the same request, so none is tried.
  private FlurryException reject(Wire.Opcode opcode, Wire.Response response, int server) {
    final boolean bad = response.status() == Wire.Status.BAD_REQUEST.ordinal();
    return new FlurryException(bad ? FlurryException.Code.BAD_REQUEST
            : FlurryException.Code.UNAUTHORIZED,
        transport.name(server) + " answered " + Wire.Status.of(response.status()) + " ("
            + Wire.requestErrorName(response.detail()) + ") to " + opcode
            + (bad ? ": the server rejects this request; is the client built for another "
                    + "wire version?"
                : ": this server requires authentication, which this client does not support"));
  }

  // Waits until the answer to the request arrives, or the deadline passes (null). Everything
  // else that arrives is counted and dropped.
  private Wire.Response await(int opcode, long count, long requestId, long deadline)
      throws FlurryException {
    // Options.poll: look without sleeping for that long first; an answer that arrives
    // meanwhile needs no wakeup of this thread, which can cost more than the round trip.
    final long pollNanos = pollAnswers ? options.poll().toNanos() : 0;
    final long start = System.nanoTime();
    for (;;) {
      final long now = System.nanoTime();
      final long left = deadline - now;
      if (left <= 0) return null;
      final int length = now - start < pollNanos
          ? transport.tryReceive(receiveBuffer)
          : transport.receive(receiveBuffer, left);
      if (length < 0) continue;
      final Wire.Response response = Wire.decodeResponse(receiveBuffer, length);
      if (response.error() != Wire.ResponseError.OK) {
        bump(Count.MALFORMED_RESPONSES, 1);
      } else if (response.requestId() != requestId) {
        bump(Count.IGNORED_RESPONSES, 1); // a late answer to an earlier attempt, or foreign
      } else if (!Wire.consistent(response, opcode, count)) {
        bump(Count.MALFORMED_RESPONSES, 1);
      } else {
        return response;
      }
    }
  }

  // The attempts ran out: name every server that failed, in order of first failure.
  private FlurryException failAttempts() {
    final String attemptsText =
        options.attempts() + (options.attempts() == 1 ? " attempt" : " attempts");
    final Set<Integer> order = new LinkedHashSet<>();
    boolean allTimeouts = true;
    boolean anyFenced = false;
    for (Failure failure : failures) {
      allTimeouts &= failure.kind() == Kind.TIMEOUT;
      anyFenced |= failure.kind() == Kind.FENCED;
      order.add(failure.server());
    }
    if (allTimeouts) {
      final List<String> names = new ArrayList<>();
      for (int server : order) names.add(transport.name(server));
      return new FlurryException(FlurryException.Code.NO_ANSWER,
          "no answer from " + String.join(", ", names) + " after " + attemptsText + " of "
              + options.timeout().toMillis() + " ms");
    }
    final List<String> parts = new ArrayList<>();
    for (int server : order) parts.add(describeFailures(server));
    return new FlurryException(anyFenced ? FlurryException.Code.FENCED
            : FlurryException.Code.NO_ANSWER,
        "no server could serve the request after " + attemptsText + ": "
            + String.join("; ", parts));
  }

  // e.g. "10.0.0.1:7420 answered FENCED once (it lost its node id), gave no answer within
  // 100 ms 2 times".
  private String describeFailures(int server) {
    int timeouts = 0;
    int fenced = 0;
    int sendFailed = 0;
    String reason = "";
    for (Failure failure : failures) {
      if (failure.server() != server) continue;
      switch (failure.kind()) {
        case TIMEOUT -> ++timeouts;
        case FENCED -> ++fenced;
        case SEND_FAILED -> {
          ++sendFailed;
          reason = failure.reason();
        }
      }
    }
    final List<String> what = new ArrayList<>();
    if (fenced > 0) what.add("answered FENCED" + times(fenced) + " (it lost its node id)");
    if (timeouts > 0) {
      what.add("gave no answer within " + options.timeout().toMillis() + " ms" + times(timeouts));
    }
    if (sendFailed > 0) what.add("could not be sent to (" + reason + ")" + times(sendFailed));
    return transport.name(server) + " " + String.join(", ", what);
  }

  private static String times(int n) {
    return n == 1 ? " once" : " " + n + " times";
  }

  /**
   * Appends GET_IDS ranges holding exactly n IDs to {@code out}, asking again after partial
   * answers; on failure appends nothing (IDs already received are dropped, never reused).
   */
  void fetch(long n, List<Wire.Range> out) throws FlurryException {
    final int original = out.size();
    long remaining = n;
    try {
      while (remaining > 0) {
        final long count = Math.min(remaining, options.idsPerRequest());
        // Padding that lets the answer carry enough ranges for `count` IDs.
        final int paddedSize = Wire.requestSizeForIds(count, IDS_PER_RANGE_ASSUMED);
        final Wire.Response ok = run(Wire.Opcode.GET_IDS, count, paddedSize);
        out.addAll(ok.ranges());
        final long ids = ok.idCount(); // consistent(): ids <= count <= remaining
        bump(Count.IDS_RECEIVED, ids);
        remaining -= ids;
      }
    } catch (FlurryException e) {
      out.subList(original, out.size()).clear();
      throw e;
    }
  }
}
