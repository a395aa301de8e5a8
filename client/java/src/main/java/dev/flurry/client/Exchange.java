// client/java/.../Exchange.java — internal: one request/answer with failover, RETRY back-off
// and answer validation (the C++ client/exchange.cc, rule for rule).
//
// Contract:
//   * Every datagram sent carries a fresh, unpredictable request id (8 bytes of SecureRandom,
//     drawn a block at a time; never a counter), and goes out on the socket connected to its
//     server, from which alone its answer is read (Transport). An answer is accepted only if it passes
//     Wire.decodeResponse (rules 1..12), echoes the outstanding request id (13) and is
//     consistent with the request (14, 15: same opcode, never more IDs than asked). A datagram
//     failing 13 counts as ignoredResponses, one failing any other rule as malformedResponses;
//     either way nothing from it is used and the attempt keeps waiting until its deadline.
//   * RETRY sleeps the server's hint clamped to 50 µs..retryWaitMax and asks the same server
//     again without using an attempt, until retryBudget of sleeping would be exceeded
//     (RETRY_EXHAUSTED). A timeout, a failed send and FENCED use an attempt and move to the
//     next server (wrapping). FENCED names why (detail 1: draining, its operator stops it;
//     else it holds no node id); when the attempts run out and every FENCED seen was
//     draining, the exchange fails DRAINING, else FENCED. BAD_REQUEST and UNAUTHORIZED end the
//     exchange, but for a signed UNAUTHORIZED wrong_server: the verified answer names the
//     server's node id, so the request is signed again for it and sent to the same server at
//     once, without using an attempt (twice at most in a row). EXHAUSTED ends the exchange
//     (EXHAUSTED): no server can ever issue those IDs or numbers again.
//   * NOT_OWNER (GET_SEQ of a monotonic sequence another node serves) uses an attempt and asks
//     the server last heard answering as the node it names (every accepted answer's header
//     names its node; FENCED answers do not count), else the next server, whose answer
//     teaches its node; when every server answered during this exchange and none is the
//     owner (or the attempts run out) the exchange fails NOT_OWNER. With no owner known (or a
//     server naming itself: a move under way) it sleeps OWNER_MOVE_WAIT_NANOS, within
//     retryBudget (the budget RETRY uses), and asks the next server without using an
//     attempt. UNKNOWN_SEQUENCE ends the exchange.
//   * With Options.key, every attempt is signed anew (PROTOCOL.md "Authentication": a fresh
//     wall-clock timestamp, so a fresh MAC: a resent copy would be a replay), for the node id
//     the server last answered as (Wire.ANY_SERVER until it has: PING and INFO are served,
//     GET_IDS and GET_SEQ answered wrong_server naming it), 3 bytes longer than the unsigned
//     request (3x of them pays for the answer's MAC), at least 44. An answer
//     is then accepted only if it is 28+ bytes and its MAC verifies against the request's
//     MAC; anything else counts as unverifiedResponses before any other rule and the attempt
//     waits on. It is then decoded without its last 8 bytes. An unsigned UNAUTHORIZED cannot
//     be trusted (anyone on the path could send it): it is not accepted, but when the
//     attempts run out its reason is named (UNAUTHORIZED). A signed UNAUTHORIZED (the key is
//     not allowed the request; stale_timestamp: the clocks disagree) ends the exchange as any
//     UNAUTHORIZED. A signed client whose attempts all time out is told that a server drops
//     signed requests whose key id it does not know or whose MAC does not verify.
//   * With Options.poll, a wait reads the socket without blocking for up to `poll` before it
//     blocks, unless pollAnswers(false) (the prefetch refill thread: no caller waits on it).
//   * Not thread-safe: the caller serializes run() and fetch() (FlurryClient's io lock).
//     counters() may be read from any thread.
package dev.flurry.client;

import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLongArray;

final class Exchange {
  /** A RETRY hint of 0 must not turn into a busy loop. */
  static final long RETRY_WAIT_MIN_NANOS = 50_000;
  /** After a send that fails at once, so the attempts are not spun through. */
  static final long SEND_FAILURE_PAUSE_NANOS = 1_000_000;
  /**
   * NOT_OWNER with no owner known: a sequence's owner is settled within a second or so (the
   * servers' sync period), so ask again after this, within Options.retryBudget.
   */
  static final long OWNER_MOVE_WAIT_NANOS = 50_000_000;
  /**
   * A conservative guess of how many IDs one range carries (a 12-bit sequence shared by 16
   * workers, or js-safe's 11 bits shared by 8), as the C++ client assumes. It only sizes the
   * padding: a server with smaller slices answers with fewer IDs and the client asks again.
   */
  static final long IDS_PER_RANGE_ASSUMED = 256;

  enum Count {
    REQUESTS, RESPONSES, RETRIES, TIMEOUTS, FENCED, IGNORED_RESPONSES, MALFORMED_RESPONSES,
    SEND_ERRORS, IDS_RECEIVED, UNVERIFIED_RESPONSES
  }

  private enum Kind { TIMEOUT, FENCED, DRAINING, SEND_FAILED, NOT_OWNER }

  // What one attempt leads to.
  // OTHER_SERVER: the next server without using an attempt (after a wait for an owner).
  // RESIGN: the same server at once, signed for the node it named, without using an attempt.
  private enum Step { ANSWERED, SAME_SERVER, RESIGN, NEXT_SERVER, OTHER_SERVER, OWNER_SERVER }

  /** wrong_server answers in a row after which the request is refused as any UNAUTHORIZED. */
  static final int RESIGNS_MAX = 2;

  /**
   * Unpredictable request ids: SecureRandom, drawn 512 bytes at a time (one call per 64 ids),
   * 8 bytes an id. Never a counter: anyone who saw one request must not guess the next.
   */
  static final class RequestIds {
    private final SecureRandom random = new SecureRandom();
    private final byte[] block = new byte[512];
    private int used = block.length;

    long next() {
      if (used == block.length) {
        random.nextBytes(block);
        used = 0;
      }
      long id = 0;
      for (int i = 0; i < 8; ++i) id = id << 8 | (block[used++] & 0xffL);
      return id;
    }
  }

  // reason: SEND_FAILED's error; owner: the node NOT_OWNER named, or Wire.NOT_OWNER_UNKNOWN.
  private record Failure(Kind kind, int server, String reason, long owner) {
    Failure(Kind kind, int server) {
      this(kind, server, null, Wire.NOT_OWNER_UNKNOWN);
    }
  }

  // serverNode's entry for a server that has not answered yet (a node id is 16 bits).
  private static final int NODE_UNKNOWN = -1;
  private static final long STALE_TIMESTAMP = 35;

  private final Options options;
  private final Transport transport;
  private final AtomicLongArray counters = new AtomicLongArray(Count.values().length);
  private final byte[] sendBuffer = new byte[Wire.DATAGRAM_SIZE_MAX];
  // One byte more than any valid datagram, so an oversize one is seen as such.
  private final byte[] receiveBuffer = new byte[Wire.DATAGRAM_SIZE_MAX + 1];
  private final List<Failure> failures = new ArrayList<>();
  private int current; // the server asked first; moves on timeout, failed send, FENCED, NOT_OWNER
  private int ownerServer; // Step.OWNER_SERVER: where NOT_OWNER pointed
  // The node each server last answered as (its header's node), NODE_UNKNOWN until it answers.
  private final int[] serverNode;
  private final boolean[] heard; // which servers answered during the current run()
  private String seqName; // GET_SEQ: the sequence fetchSeq asks for
  private final RequestIds requestIds = new RequestIds();
  private int resigned; // wrong_server answers in a row (a signed client learns the node)
  private long retryWaitedNanos;
  private boolean pollAnswers = true;
  private Wire.Response answer;
  private int answerServer;
  private long rttNanos;
  private long requestMac; // Options.key: the MAC of the request outstanding
  // Options.key: the reason of an unsigned UNAUTHORIZED to this run's request (0: none), for
  // the error message only.
  private long unsignedRefusal;

  Exchange(Options options, Transport transport) {
    this.options = options;
    this.transport = transport;
    this.serverNode = new int[transport.serverCount()];
    this.heard = new boolean[transport.serverCount()];
    Arrays.fill(serverNode, NODE_UNKNOWN);
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
    unsignedRefusal = 0;
    Arrays.fill(heard, false);
    int attempt = 0;
    while (attempt < options.attempts()) {
      switch (attemptOnce(opcode, count, paddedSize)) {
        case ANSWERED -> {
          return answer;
        }
        case SAME_SERVER -> {} // RETRY, slept already: the attempt is not used up
        case RESIGN -> {} // signed again for the node the server named: not used up
        case OTHER_SERVER -> // a wait for an owner, slept already: the attempt is not used up
            current = (current + 1) % transport.serverCount();
        case NEXT_SERVER -> {
          current = (current + 1) % transport.serverCount();
          ++attempt;
        }
        case OWNER_SERVER -> {
          current = ownerServer;
          ++attempt;
        }
      }
    }
    throw failAttempts();
  }

  // Sends one request to the current server and waits for its answer (in `answer` when OK).
  private Step attemptOnce(Wire.Opcode opcode, long count, int paddedSize)
      throws FlurryException {
    answer = null;
    final int server = current;
    final long requestId = requestIds.next();
    final int size = encode(opcode, count, requestId, paddedSize, server);
    final long sent = System.nanoTime();
    bump(Count.REQUESTS, 1);
    final String sendError = transport.send(server, sendBuffer, size);
    if (sendError != null) {
      bump(Count.SEND_ERRORS, 1);
      failures.add(new Failure(Kind.SEND_FAILED, server, sendError, Wire.NOT_OWNER_UNKNOWN));
      transport.pause(SEND_FAILURE_PAUSE_NANOS);
      return Step.NEXT_SERVER;
    }
    final Wire.Response accepted =
        await(server, opcode.code, count, requestId, sent + options.timeout().toNanos());
    if (accepted == null) {
      bump(Count.TIMEOUTS, 1);
      failures.add(new Failure(Kind.TIMEOUT, server));
      return Step.NEXT_SERVER;
    }
    bump(Count.RESPONSES, 1);
    answerServer = server;
    noteNode(accepted, server);
    final boolean wrongServer = accepted.status() == Wire.Status.UNAUTHORIZED.ordinal()
        && accepted.detail() == Wire.WRONG_SERVER;
    if (!wrongServer) resigned = 0;
    switch (Wire.Status.of(accepted.status())) {
      case OK -> {
        rttNanos = System.nanoTime() - sent;
        answer = accepted;
        return Step.ANSWERED;
      }
      case RETRY -> {
        onRetry(accepted, server);
        return Step.SAME_SERVER;
      }
      case FENCED -> {
        bump(Count.FENCED, 1);
        failures.add(new Failure(
            accepted.detail() == Wire.FENCED_DRAINING ? Kind.DRAINING : Kind.FENCED, server));
        return Step.NEXT_SERVER;
      }
      case NOT_OWNER -> {
        return onNotOwner(accepted, server);
      }
      case UNAUTHORIZED -> {
        // Signed for a node id this server does not serve (the first request to it, or the
        // node moved): the verified answer named its node (noteNode), so sign again for it,
        // once or twice; a server that keeps naming another node is refused as any
        // UNAUTHORIZED.
        if (wrongServer && options.key() != null && resigned < RESIGNS_MAX) {
          ++resigned;
          return Step.RESIGN;
        }
        throw reject(opcode, accepted, server);
      }
      case EXHAUSTED -> throw new FlurryException(FlurryException.Code.EXHAUSTED,
          transport.name(server) + " answered EXHAUSTED to " + opcode
              + (opcode == Wire.Opcode.GET_SEQ
                  ? ": the sequence '" + seqName
                      + "' has reached 2^63 and can issue no number again"
                  : ": the ID layout's time field has run out (its last instant has passed): no"
                      + " server of this layout can issue IDs again; a new layout or epoch is"
                      + " needed"));
      default -> throw reject(opcode, accepted, server);
    }
  }

  // Records the node a server answered as. A FENCED server still names the node id it lost,
  // which may be another server's now: not recorded. A node id answered by one server is no
  // longer another's (node ids move between processes after a fence).
  private void noteNode(Wire.Response response, int server) {
    if (response.status() == Wire.Status.FENCED.ordinal()) {
      serverNode[server] = NODE_UNKNOWN;  // it serves as no node now, and is not heard as one
      return;
    }
    heard[server] = true;
    for (int i = 0; i < serverNode.length; ++i) {
      if (serverNode[i] == response.node()) serverNode[i] = NODE_UNKNOWN;
    }
    serverNode[server] = response.node();
  }

  // NOT_OWNER: ask the owner it names if a server has answered as that node, else the next
  // server (an unheard server may be the named one). No owner known, or the answering server
  // naming its own node (its old owner key lives until its old lease ends), is a move under
  // way: wait for it as for RETRY, within the same budget, and ask the next server.
  private Step onNotOwner(Wire.Response response, int server) throws FlurryException {
    final long owner = response.detail();
    failures.add(new Failure(Kind.NOT_OWNER, server, null, owner));
    if (owner == Wire.NOT_OWNER_UNKNOWN || owner == response.node()) {
      if (retryWaitedNanos + OWNER_MOVE_WAIT_NANOS > options.retryBudget().toNanos()) {
        return Step.NEXT_SERVER;
      }
      transport.pause(OWNER_MOVE_WAIT_NANOS);
      retryWaitedNanos += OWNER_MOVE_WAIT_NANOS;
      return Step.OTHER_SERVER;
    }
    for (int i = 0; i < serverNode.length; ++i) {
      if (serverNode[i] == owner && i != server) {
        ownerServer = i;
        return Step.OWNER_SERVER;
      }
    }
    // Given up only on what this run heard: an earlier run's record may be stale.
    for (boolean answered : heard) {
      if (!answered) return Step.NEXT_SERVER;
    }
    throw new FlurryException(FlurryException.Code.NOT_OWNER, transport.name(server)
        + " does not serve the monotonic sequence '" + seqName + "': node " + owner
        + " does, and none of this client's servers answers as that node (add it to the server"
        + " list)");
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

  // BAD_REQUEST, UNAUTHORIZED or UNKNOWN_SEQUENCE: another server would answer the same, so
  // none is tried.
  private FlurryException reject(Wire.Opcode opcode, Wire.Response response, int server) {
    if (response.status() == Wire.Status.UNKNOWN_SEQUENCE.ordinal()) {
      return new FlurryException(FlurryException.Code.UNKNOWN_SEQUENCE, transport.name(server)
          + " has no sequence '" + seqName + "' (flurryctl seq create " + seqName + ")");
    }
    final boolean bad = response.status() == Wire.Status.BAD_REQUEST.ordinal();
    final String why;
    if (bad) {
      why = ": the server rejects this request; is the client built for another wire version?";
    } else if (options.key() == null) {
      why = ": this server requires authentication; give the client a key"
          + " (FlurryClient.Builder.key, Key.readFile)";
    } else if (response.detail() == STALE_TIMESTAMP) {
      why = ": this client's clock is further from the server's than its window allows, or the"
          + " server started (or took its node id) after the request was signed: check both"
          + " clocks (NTP)";
    } else if (response.detail() == Wire.WRONG_SERVER) {
      why = ": the server kept naming another node id than the one the request was signed for";
    } else {
      why = ": the key is not allowed this request (see flurryctl keys list)";
    }
    return new FlurryException(bad ? FlurryException.Code.BAD_REQUEST
            : FlurryException.Code.UNAUTHORIZED,
        transport.name(server) + " answered " + Wire.Status.of(response.status()) + " ("
            + Wire.requestErrorName(response.detail()) + ") to " + opcode + why);
  }

  // Unsigned: the padded request. Signed: 3 bytes more than that, at least 44, ending with the
  // trailer for the node id `server` last answered as (ANY_SERVER until it has), stamped with
  // the wall clock now (each attempt: a resent MAC is a replay).
  private int encode(Wire.Opcode opcode, long count, long requestId, int paddedSize,
      int server) {
    final String name = opcode == Wire.Opcode.GET_SEQ ? seqName : null;
    final Key key = options.key();
    if (key == null) {
      return name != null
          ? Wire.encodeSeqRequest(0, count, requestId, name, paddedSize, sendBuffer)
          : Wire.encodeRequest(opcode.code, 0, count, requestId, paddedSize, sendBuffer);
    }
    final int size = Math.min(Math.max(Math.max(paddedSize, Wire.REQUEST_HEADER_SIZE) + 3,
        Auth.SIGNED_REQUEST_SIZE_MIN), Wire.DATAGRAM_SIZE_MAX);
    final long node =
        serverNode[server] == NODE_UNKNOWN ? Wire.ANY_SERVER : serverNode[server];
    final int written = Auth.encodeSignedRequest(opcode.code, count, requestId, name, size, key,
        node, wallClockMicros(), sendBuffer);
    requestMac = Auth.storedMac(sendBuffer, written);
    return written;
  }

  private static long wallClockMicros() {
    final Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
  }

  // Options.key: true if the answer's MAC verifies. Otherwise counts it and remembers an
  // unsigned UNAUTHORIZED to this request for failAttempts (its text only: it is not trusted).
  private boolean verified(int length, long requestId) {
    if (Auth.verifyAnswer(receiveBuffer, length, requestMac, options.key())) return true;
    bump(Count.UNVERIFIED_RESPONSES, 1);
    final Wire.Response response = Wire.decodeResponse(receiveBuffer, length);
    if (response.error() == Wire.ResponseError.OK && response.requestId() == requestId
        && response.status() == Wire.Status.UNAUTHORIZED.ordinal()) {
      unsignedRefusal = response.detail();
    }
    return false;
  }

  // Waits until the answer to the request arrives, or the deadline passes (null). Everything
  // else that arrives is counted and dropped.
  private Wire.Response await(int server, int opcode, long count, long requestId,
      long deadline) throws FlurryException {
    // Options.poll: look without sleeping for that long first; an answer that arrives
    // meanwhile needs no wakeup of this thread, which can cost more than the round trip.
    final long pollNanos = pollAnswers ? options.poll().toNanos() : 0;
    final long start = System.nanoTime();
    for (;;) {
      final long now = System.nanoTime();
      final long left = deadline - now;
      if (left <= 0) return null;
      final int length = now - start < pollNanos
          ? transport.tryReceive(server, receiveBuffer)
          : transport.receive(server, receiveBuffer, left);
      if (length < 0) continue;
      if (options.key() != null && !verified(length, requestId)) continue;
      final Wire.Response response = Wire.decodeResponse(receiveBuffer,
          options.key() != null ? length - Auth.MAC_SIZE : length);
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
    boolean anyDraining = false;
    boolean anyNotOwner = false;
    for (Failure failure : failures) {
      allTimeouts &= failure.kind() == Kind.TIMEOUT;
      anyFenced |= failure.kind() == Kind.FENCED;
      anyDraining |= failure.kind() == Kind.DRAINING;
      anyNotOwner |= failure.kind() == Kind.NOT_OWNER;
      order.add(failure.server());
    }
    if (unsignedRefusal != 0) { // attempts ran out after an unverifiable refusal: name it
      return new FlurryException(FlurryException.Code.UNAUTHORIZED, "no verifiable answer after "
          + attemptsText + "; an unsigned UNAUTHORIZED (" + Wire.requestErrorName(unsignedRefusal)
          + ") came back, which a signed client cannot trust: check the key id, secret and clock");
    }
    if (allTimeouts) {
      final List<String> names = new ArrayList<>();
      for (int server : order) names.add(transport.name(server));
      // A signed request naming a key the server lacks, or with a wrong secret, is dropped
      // unanswered (PROTOCOL.md: no oracle): from here that looks like silence.
      return new FlurryException(FlurryException.Code.NO_ANSWER,
          "no answer from " + String.join(", ", names) + " after " + attemptsText + " of "
              + options.timeout().toMillis() + " ms"
              + (options.key() != null ? " (a server drops signed requests whose key id it does"
                  + " not know or whose MAC does not verify: check the key id and secret,"
                  + " flurryctl keys list)" : ""));
    }
    final List<String> parts = new ArrayList<>();
    for (int server : order) parts.add(describeFailures(server));
    // NOT_OWNER says most: the sequence is served, just not by the servers that answered.
    return new FlurryException(anyNotOwner ? FlurryException.Code.NOT_OWNER
            : anyFenced ? FlurryException.Code.FENCED
            : anyDraining ? FlurryException.Code.DRAINING
            : FlurryException.Code.NO_ANSWER,
        "no server could serve the request after " + attemptsText + ": "
            + String.join("; ", parts));
  }

  // e.g. "10.0.0.1:7420 answered FENCED once (it holds no node id: lost, or not yet claimed),
  // gave no answer within 100 ms 2 times".
  private String describeFailures(int server) {
    int timeouts = 0;
    int fenced = 0;
    int draining = 0;
    int sendFailed = 0;
    int notOwner = 0;
    String reason = "";
    long owner = Wire.NOT_OWNER_UNKNOWN;
    for (Failure failure : failures) {
      if (failure.server() != server) continue;
      switch (failure.kind()) {
        case TIMEOUT -> ++timeouts;
        case FENCED -> ++fenced;
        case DRAINING -> ++draining;
        case SEND_FAILED -> {
          ++sendFailed;
          reason = failure.reason();
        }
        case NOT_OWNER -> {
          ++notOwner;
          owner = failure.owner();
        }
      }
    }
    final List<String> what = new ArrayList<>();
    if (fenced > 0) {
      what.add("answered FENCED" + times(fenced) + " (it holds no node id: lost, or not yet"
          + " claimed)");
    }
    if (draining > 0) {
      what.add("answered FENCED" + times(draining) + " (draining: its operator is stopping it)");
    }
    if (notOwner > 0) {
      what.add("answered NOT_OWNER" + times(notOwner) + " ("
          + (owner == Wire.NOT_OWNER_UNKNOWN ? "no owner known" : "node " + owner + " serves it")
          + ")");
    }
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
    fetchOpcode(Wire.Opcode.GET_IDS, n, out);
  }

  /** As fetch(), numbers of the named sequence (GET_SEQ). */
  void fetchSeq(String name, long n, List<Wire.Range> out) throws FlurryException {
    seqName = name;
    fetchOpcode(Wire.Opcode.GET_SEQ, n, out);
  }

  private void fetchOpcode(Wire.Opcode opcode, long n, List<Wire.Range> out)
      throws FlurryException {
    final int original = out.size();
    long remaining = n;
    try {
      while (remaining > 0) {
        final long count = Math.min(remaining, options.idsPerRequest());
        // Padding that lets the answer carry enough ranges for `count` IDs.
        final int paddedSize = Wire.requestSizeForIds(count, IDS_PER_RANGE_ASSUMED);
        final Wire.Response ok = run(opcode, count, paddedSize);
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
