// client/java/.../FlurryClient.java — the flurry UDP client for Java (JDK only), behaving as
// the C++ client (client/client.h) does.
//
// Contract:
//   * One client asks one server at a time, one request outstanding, over a UDP socket per
//     server connected to it (an answer is read only from the server asked). Every datagram
//     carries a fresh request id from SecureRandom; an answer is accepted only if it passes every
//     rule of proto/PROTOCOL.md "Response decoding" in order (1..12 on the datagram, 13..15
//     against the request). Anything else is counted (Counters) and ignored, so a late answer
//     to an earlier attempt is never taken for the current one.
//   * Statuses: OK is used; RETRY waits the server's hint (50 µs..retryWaitMax, at most
//     retryBudget in total per exchange) and asks the same server again; FENCED and a timeout
//     move to the next server and use up one of `attempts` (FENCED draining: DRAINING when
//     every FENCED was so); EXHAUSTED ends the call at once, asking no other server;
//     BAD_REQUEST and UNAUTHORIZED end the call with an error naming the reason (but a signed
//     wrong_server: signed again for the node it names, at once, twice at most). NOT_OWNER (getSeq of a monotonic sequence
//     another node serves, in cluster mode) uses an attempt and asks the server that last
//     answered as the node it names (every answer's header names its node; a FENCED one's
//     does not count), else the next server; the call fails NOT_OWNER when every server of
//     the list answered during the call and none is the owner. With no owner known (or a
//     server naming itself) it waits 50 ms and asks the next server without using an attempt,
//     within retryBudget. UNKNOWN_SEQUENCE ends the call.
//   * With Builder.key, every request (and each attempt of it) is signed anew and only answers
//     whose MAC verifies are accepted (PROTOCOL.md "Authentication"; Exchange has the rules).
//   * An answer may hold fewer IDs than asked (anti-amplification, ceiling): the client asks
//     again for the rest. get(n) returns exactly n IDs or throws and returns none.
//   * Thread-safe: exchanges are serialized by an internal lock, so concurrent get()/ping()/
//     info() calls queue behind each other and behind the prefetch refill. With prefetch on,
//     next() is the call for many threads: it usually pops from the local buffer.
//   * close() stops the prefetch thread (interrupting its exchange) and closes the sockets; a
//     call waiting at that moment, blocked or polling (Builder.poll), throws SHUTTING_DOWN.
//     So does a waiting call whose thread is interrupted.
package dev.flurry.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Gets unique 64-bit IDs from flurryd servers over UDP.
 *
 * <pre>{@code
 * try (FlurryClient flurry = FlurryClient.builder().servers("10.0.0.1:7420", "10.0.0.2:7420")
 *     .timeout(Duration.ofMillis(100)).prefetch(4096).build()) {
 *   long id = flurry.next();
 *   long[] batch = flurry.get(10_000);
 * }
 * }</pre>
 */
public final class FlurryClient implements AutoCloseable {
  /**
   * The client's version: the project's (the file VERSION at the repository root), also the
   * Maven artifact's (dev.flurry:flurry-client). VersionTest checks all three agree.
   */
  public static final String VERSION = "0.2.0";
  /** Where flurryd listens by default. */
  public static final String DEFAULT_SERVER = "127.0.0.1:7420";
  /** The largest n one get()/getRanges() call accepts; ask several times for more. */
  public static final int GET_COUNT_MAX = 1 << 26;

  private final Options options;
  private final Transport transport;
  private final ReentrantLock ioLock = new ReentrantLock(); // one outstanding request
  private final Exchange exchange;
  private final Prefetch prefetch; // null when prefetch is 0

  private FlurryClient(Options options, Transport transport) {
    this.options = options;
    this.transport = transport;
    this.exchange = new Exchange(options, transport);
    this.prefetch =
        options.prefetch() == 0 ? null : new Prefetch(options, exchange, ioLock, transport);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Options with the C++ client's defaults; build() checks them. */
  public static final class Builder {
    private List<String> servers = List.of(DEFAULT_SERVER);
    private Duration timeout = Duration.ofMillis(100);
    private int attempts = 5;
    private long idsPerRequest = 4096;
    private int prefetch = 0;
    private Duration retryWaitMax = Duration.ofMillis(100);
    private Duration retryBudget = Duration.ofMillis(2_000);
    private Duration poll = Duration.ZERO;
    private Key key;

    private Builder() {}

    /** "HOST:PORT" each (HOST an IPv4 address or a name), tried in order. 1..64 servers. */
    public Builder servers(String... servers) {
      this.servers = List.of(servers);
      return this;
    }

    public Builder servers(List<String> servers) {
      this.servers = List.copyOf(servers);
      return this;
    }

    /** How long one attempt waits for its answer: 1 ms..60 s (default 100 ms). */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    /**
     * Attempts per call; each timeout or FENCED moves to the next server, each NOT_OWNER to the
     * owner or the next server. 1..100 (default 5).
     */
    public Builder attempts(int attempts) {
      this.attempts = attempts;
      return this;
    }

    /** The most IDs asked in one request, 1..2^20 (default 4096); the request is padded for them. */
    public Builder idsPerRequest(long idsPerRequest) {
      this.idsPerRequest = idsPerRequest;
      return this;
    }

    /** 0 (off, the default) or 2..2^24: the background-refilled buffer next() pops from. */
    public Builder prefetch(int prefetch) {
      this.prefetch = prefetch;
      return this;
    }

    /** The longest single wait after a RETRY answer, whatever its hint: 1 ms..10 s (100 ms). */
    public Builder retryWaitMax(Duration retryWaitMax) {
      this.retryWaitMax = retryWaitMax;
      return this;
    }

    /**
     * The most one call waits on RETRY answers in all, and on NOT_OWNER with no owner known
     * (50 ms each) before it uses the attempts: 0..600 s (default 2 s).
     */
    public Builder retryBudget(Duration retryBudget) {
      this.retryBudget = retryBudget;
      return this;
    }

    /**
     * 0 (off, the default) or up to 10 ms: a call waiting for its answer reads the socket
     * without blocking for this long before it blocks, so an answer that arrives meanwhile
     * needs no wakeup of the calling thread (which can cost more than a local round trip).
     * The calling thread spins on a core while it reads; the prefetch refill thread never
     * polls. close() ends a polling call as any other.
     */
    public Builder poll(Duration poll) {
      this.poll = poll;
      return this;
    }

    /**
     * Signs every request (PING, INFO, GET_IDS, GET_SEQ, prefetch refills) with this key, or
     * none when null (the default); see {@link Key#readFile} for a client key file. Each
     * attempt is signed anew, and only answers whose MAC verifies are accepted (others are
     * counted in Counters.unverifiedResponses and waited past).
     */
    public Builder key(Key key) {
      this.key = key;
      return this;
    }

    /**
     * Checks the options, resolves every server, opens the socket and, with prefetch on,
     * starts the refill thread. Sends nothing otherwise, so it succeeds whether or not a
     * server is up.
     *
     * @throws FlurryException INVALID_ARGUMENT (an option out of bounds, a server not
     *     HOST:PORT), RESOLVE_FAILED (no IPv4 address for a HOST), SYSTEM (socket or thread)
     */
    public FlurryClient build() throws FlurryException {
      final Options options = new Options(servers, timeout, attempts, idsPerRequest, prefetch,
          retryWaitMax, retryBudget, poll, key);
      options.check();
      final Transport transport = Transport.open(options.servers());
      final FlurryClient client = new FlurryClient(options, transport);
      if (client.prefetch != null) {
        try {
          client.prefetch.start();
        } catch (FlurryException e) {
          transport.close();
          throw e;
        }
      }
      return client;
    }
  }

  /**
   * Exactly n unique IDs, in the order the server issued them, asking as many times as
   * needed; n == 0 returns an empty array at once.
   *
   * @throws FlurryException INVALID_ARGUMENT (n outside 0..GET_COUNT_MAX), NO_ANSWER, FENCED,
   *     DRAINING, EXHAUSTED, RETRY_EXHAUSTED, BAD_REQUEST, UNAUTHORIZED, SHUTTING_DOWN
   */
  public long[] get(int n) throws FlurryException {
    return expand(getRanges(n), n);
  }

  // Every number of ranges holding n, in order.
  private static long[] expand(List<Wire.Range> ranges, int n) {
    final long[] out = new long[n];
    int at = 0;
    for (Wire.Range range : ranges) {
      for (long i = 0; i < range.count(); ++i) out[at++] = range.first() + i;
    }
    return out;
  }

  /** As get(n), but ranges whose counts sum to exactly n. Same errors. */
  public List<Wire.Range> getRanges(int n) throws FlurryException {
    if (n < 0 || n > GET_COUNT_MAX) {
      throw new FlurryException(FlurryException.Code.INVALID_ARGUMENT,
          "asked for " + n + " IDs in one call; 0.." + GET_COUNT_MAX + " are allowed");
    }
    final List<Wire.Range> ranges = new ArrayList<>();
    ioLock.lock();
    try {
      exchange.fetch(n, ranges);
    } finally {
      ioLock.unlock();
    }
    return ranges;
  }

  /**
   * Exactly n numbers of the named sequence (GET_SEQ; flurryctl seq create), in the order the
   * server issued them, asking as many times as needed; n == 0 returns an empty array at once.
   * Numbers are unique for the sequence; in monotonic mode they increase. No prefetch.
   *
   * @throws FlurryException INVALID_ARGUMENT (a name not 1..32 of A-Z a-z 0-9 _ . - :, n outside
   *     0..GET_COUNT_MAX), UNKNOWN_SEQUENCE, NOT_OWNER (no server of the list serves this
   *     monotonic sequence), and those of get()
   */
  public long[] getSeq(String name, int n) throws FlurryException {
    return expand(getSeqRanges(name, n), n);
  }

  /** As getSeq(name, n), but ranges whose counts sum to exactly n. Same errors. */
  public List<Wire.Range> getSeqRanges(String name, int n) throws FlurryException {
    if (!Wire.validSeqName(name)) {
      final String shown = name == null || name.length() <= 64 ? name : name.substring(0, 64);
      throw new FlurryException(FlurryException.Code.INVALID_ARGUMENT, "bad sequence name '"
          + shown + "': 1 to " + Wire.SEQ_NAME_SIZE_MAX + " characters from A-Z a-z 0-9 _ . - :");
    }
    if (n < 0 || n > GET_COUNT_MAX) {
      throw new FlurryException(FlurryException.Code.INVALID_ARGUMENT,
          "asked for " + n + " numbers in one call; 0.." + GET_COUNT_MAX + " are allowed");
    }
    final List<Wire.Range> ranges = new ArrayList<>();
    ioLock.lock();
    try {
      exchange.fetchSeq(name, n, ranges);
    } finally {
      ioLock.unlock();
    }
    return ranges;
  }

  /**
   * One ID. With prefetch on, pops from the local buffer (waking the refill thread when it
   * falls below half) and fetches synchronously only when it is empty; otherwise one request.
   *
   * @throws FlurryException NO_ANSWER, FENCED, DRAINING, EXHAUSTED, RETRY_EXHAUSTED, BAD_REQUEST,
   *     UNAUTHORIZED, SHUTTING_DOWN
   */
  public long next() throws FlurryException {
    if (prefetch != null) return prefetch.next();
    return getRanges(1).get(0).first();
  }

  /**
   * Round-trip time of one PING exchange, with the same attempts and failover as get(). A
   * fenced server still answers PING, so ping never fails with FENCED.
   *
   * @throws FlurryException NO_ANSWER, BAD_REQUEST, UNAUTHORIZED, SHUTTING_DOWN
   */
  public PingResult ping() throws FlurryException {
    ioLock.lock();
    try {
      final Wire.Response ok = exchange.run(Wire.Opcode.PING, 0, Wire.REQUEST_HEADER_SIZE);
      return new PingResult(Duration.ofNanos(exchange.rttNanos()), exchange.answerServerName(),
          ok.node());
    } finally {
      ioLock.unlock();
    }
  }

  /**
   * The server's layout as INFO reports it (not validated; see layout()).
   *
   * @throws FlurryException NO_ANSWER, BAD_REQUEST, UNAUTHORIZED, SHUTTING_DOWN
   */
  public Wire.Info info() throws FlurryException {
    ioLock.lock();
    try {
      return exchange.run(Wire.Opcode.INFO, 0, Wire.REQUEST_HEADER_SIZE).info();
    } finally {
      ioLock.unlock();
    }
  }

  /**
   * The layout INFO reports, checked against the layout rules, ready to decode IDs:
   * {@code client.layout().decode(id)} gives time, Unix ms, node, core and counter.
   *
   * @throws FlurryException BAD_LAYOUT (the server's layout fails the rules), and those of info()
   */
  public Layout layout() throws FlurryException {
    final Layout layout = Layout.fromInfo(info());
    final String invalid = layout.check();
    if (invalid != null) {
      throw new FlurryException(FlurryException.Code.BAD_LAYOUT,
          "the layout " + exchange.answerServerName() + " reported is not usable: " + invalid);
    }
    return layout;
  }

  /** A snapshot of this client's counters. */
  public Counters counters() {
    return new Counters(
        exchange.count(Exchange.Count.REQUESTS),
        exchange.count(Exchange.Count.RESPONSES),
        exchange.count(Exchange.Count.RETRIES),
        exchange.count(Exchange.Count.TIMEOUTS),
        exchange.count(Exchange.Count.FENCED),
        exchange.count(Exchange.Count.IGNORED_RESPONSES),
        exchange.count(Exchange.Count.MALFORMED_RESPONSES),
        exchange.count(Exchange.Count.SEND_ERRORS),
        exchange.count(Exchange.Count.UNVERIFIED_RESPONSES),
        exchange.count(Exchange.Count.IDS_RECEIVED),
        prefetch == null ? 0 : prefetch.refills(),
        prefetch == null ? 0 : prefetch.failures());
  }

  /** Waits that found no answer queued and blocked (tests). */
  long blockedWaits() {
    return transport.blockedWaits.get();
  }

  /** Looks at the socket that found no datagram, polling or not (tests). */
  long emptyLooks() {
    return transport.emptyLooks.get();
  }

  /** The servers as given, in order. */
  public List<String> servers() {
    return options.servers();
  }

  /**
   * Stops the prefetch thread (interrupting its exchange) and closes the sockets. Calls waiting
   * at that moment throw SHUTTING_DOWN; IDs left in the prefetch buffer are never used.
   * Idempotent.
   */
  @Override
  public void close() {
    transport.close();
    if (prefetch != null) prefetch.stop();
  }
}
