// client/java/.../Options.java — a client's checked, immutable options (built by
// FlurryClient.Builder). Bounds are those of the C++ client (client/client.h).
package dev.flurry.client;

import java.time.Duration;
import java.util.List;

/**
 * @param servers "HOST:PORT" each, tried in order; 1..SERVERS_MAX
 * @param timeout how long one attempt waits for its answer
 * @param attempts attempts per exchange; each timeout or FENCED moves to the next server
 * @param idsPerRequest the most IDs asked in one request (the request is padded for them)
 * @param prefetch 0 (off) or the size of the background-refilled ID buffer
 * @param retryWaitMax the longest single wait after a RETRY answer, whatever its hint
 * @param retryBudget the most time one exchange spends waiting on RETRY answers (and on
 *     NOT_OWNER with no owner known, before it uses the attempts)
 * @param poll how long a caller's wait reads without blocking before it blocks; 0: off
 * @param key null, or the key every request is signed with (answers must verify)
 */
record Options(
    List<String> servers,
    Duration timeout,
    int attempts,
    long idsPerRequest,
    int prefetch,
    Duration retryWaitMax,
    Duration retryBudget,
    Duration poll,
    Key key) {

  static final int SERVERS_MAX = 64;
  static final Duration TIMEOUT_MIN = Duration.ofMillis(1);
  static final Duration TIMEOUT_MAX = Duration.ofMillis(60_000);
  static final int ATTEMPTS_MAX = 100;
  static final int PREFETCH_MIN = 2;
  static final int PREFETCH_MAX = 1 << 24;
  static final Duration RETRY_WAIT_MAX_MIN = Duration.ofMillis(1);
  static final Duration RETRY_WAIT_MAX_MAX = Duration.ofMillis(10_000);
  static final Duration RETRY_BUDGET_MAX = Duration.ofMillis(600_000);
  static final Duration POLL_MAX = Duration.ofMillis(10); // the C++ client's poll_max

  /** Throws INVALID_ARGUMENT naming the first option out of bounds. */
  void check() throws FlurryException {
    if (servers.isEmpty()) fail("no server given; pass at least one HOST:PORT");
    if (servers.size() > SERVERS_MAX) {
      fail(servers.size() + " servers given; at most " + SERVERS_MAX + " are allowed");
    }
    checkDuration("timeout", timeout, TIMEOUT_MIN, TIMEOUT_MAX);
    if (attempts < 1 || attempts > ATTEMPTS_MAX) {
      fail("attempts " + attempts + " is out of range 1.." + ATTEMPTS_MAX);
    }
    if (idsPerRequest < 1 || idsPerRequest > Wire.COUNT_MAX) {
      fail("ids per request " + idsPerRequest + " is out of range 1.." + Wire.COUNT_MAX);
    }
    if (prefetch != 0 && (prefetch < PREFETCH_MIN || prefetch > PREFETCH_MAX)) {
      fail("prefetch " + prefetch + " is out of range: 0 (off) or " + PREFETCH_MIN + ".."
          + PREFETCH_MAX);
    }
    checkDuration("retry wait max", retryWaitMax, RETRY_WAIT_MAX_MIN, RETRY_WAIT_MAX_MAX);
    checkDuration("retry budget", retryBudget, Duration.ZERO, RETRY_BUDGET_MAX);
    checkDuration("poll", poll, Duration.ZERO, POLL_MAX);
  }

  private static void checkDuration(String name, Duration value, Duration min, Duration max)
      throws FlurryException {
    if (value == null || value.compareTo(min) < 0 || value.compareTo(max) > 0) {
      fail(name + " " + (value == null ? "null" : text(value))
          + " is out of range " + min.toMillis() + ".." + max.toMillis() + " ms");
    }
  }

  // Whole milliseconds as "N ms"; a finer value in us or ns, so that 10.001 ms does not print
  // as the bound of 10 ms it exceeds.
  private static String text(Duration value) {
    if (value.getNano() % 1_000_000 == 0) return value.toMillis() + " ms";
    if (value.getNano() % 1_000 == 0) return value.toNanos() / 1_000 + " us";
    return value.toNanos() + " ns";
  }

  private static void fail(String message) throws FlurryException {
    throw new FlurryException(FlurryException.Code.INVALID_ARGUMENT, message);
  }
}
