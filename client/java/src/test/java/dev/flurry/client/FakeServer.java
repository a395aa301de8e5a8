// client/java/.../FakeServer.java — test-only: a UDP server on 127.0.0.1 whose answers a test
// scripts request by request. It records every request (decoded header, GET_SEQ's name, size,
// arrival time) and issues IDs from its own counter, so two fake servers never hand out the
// same ID. monotonic() makes one node of a cluster serving a monotonic sequence instead.
//
// signing(key, ...) makes a server that checks signed requests as flurryd does with that key
// (a MAC that does not verify is dropped unanswered, counted in badMacs(); a verified GET_IDS
// or GET_SEQ signed for another node id than its own is answered UNAUTHORIZED wrong_server,
// signed, naming its node, and counted in wrongServerAnswers(), without reaching the handler)
// and signs reply()s to a verified request; send() sends bytes as they are, for unsigned or
// forged answers; forge() sends them from another socket (another source port).
//
// Contract: the handler runs on the server's one thread, in arrival order; close() stops the
// thread and closes the socket (bounded: the receive loop wakes every 50 ms).
package dev.flurry.client;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

final class FakeServer implements AutoCloseable {
  /** One request as the server saw it; trailer is null unless it had FLAG_AUTH and 44+ bytes. */
  record Request(int opcode, long count, long requestId, String name, int size,
      long receivedNanos, Trailer trailer) {}

  /**
   * A signed request's trailer; server: the node id it was signed for (Wire.ANY_SERVER: any);
   * verified: its MAC is right for the server's key.
   */
  record Trailer(long keyId, long server, long timestampUs, long mac, boolean verified) {}

  /** Scripts the answer to one request; call server.reply(...) zero or more times. */
  interface Handler {
    void handle(FakeServer server, Request request, int index) throws IOException;
  }

  private final DatagramSocket socket;
  private final Handler handler;
  private final Thread thread;
  private final List<Request> requests = new ArrayList<>();
  private volatile boolean stopping;
  private SocketAddress client;
  private final Key key; // signing(): the key requests must be signed with, else null
  private Trailer current; // the trailer of the request being handled
  private int badMacs;
  private int wrongServerAnswers;
  // signing(): after each wrong_server answer the node id moves on by one (a server that
  // keeps naming another node than the one the request was signed for).
  private volatile boolean nodeMovesOnWrongServer;
  private long nextId;
  // monotonic(): this server's node id, the sequence's owner (switchable while it runs),
  // whether it serves when it is the owner, whether it is fenced, and how many NOT_OWNER and
  // FENCED answers it sent.
  private volatile int node = 5;
  private volatile long sequenceOwner;
  private volatile boolean serveIfMine = true;
  private volatile boolean fenced;
  private int notOwnerAnswers;
  private int fencedAnswers;

  FakeServer(long firstId, Handler handler) throws SocketException {
    this(firstId, null, handler);
  }

  private FakeServer(long firstId, Key key, Handler handler) throws SocketException {
    this.key = key;
    this.socket = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0));
    this.socket.setSoTimeout(50);
    this.handler = handler;
    this.nextId = firstId;
    this.thread = new Thread(this::serve, "fake-flurryd-" + socket.getLocalPort());
    this.thread.setDaemon(true);
    this.thread.start();
  }

  /** A server that answers every GET_IDS with up to `ranges` ranges of `perRange` IDs. */
  static FakeServer issuing(long firstId, long perRange, int ranges) throws SocketException {
    return new FakeServer(firstId, (server, request, index) -> server.answerIds(request,
        perRange, ranges));
  }

  /**
   * One node of a cluster serving the monotonic sequence `name`, its node id in every
   * answer's header: while the owner (setSequenceOwner) is its node it issues 1, 2, 3, ... in
   * order, otherwise it answers NOT_OWNER naming the owner (Wire.NOT_OWNER_UNKNOWN: none
   * known). Fenced (fence()) it answers FENCED, its header still naming its node (a server
   * that lost its node id). Another name gets UNKNOWN_SEQUENCE. It answers GET_SEQ only.
   */
  static FakeServer monotonic(String name, int node, long owner) throws SocketException {
    final FakeServer server = new FakeServer(1, (s, request, index) -> s.answerSeq(name, request));
    server.node = node;
    server.sequenceOwner = owner;
    return server;
  }

  void setSequenceOwner(long owner) {
    setSequenceOwner(owner, true);
  }

  /**
   * With `serveIfMine` false it answers NOT_OWNER naming `owner` even when that is itself (a
   * restarted owner whose old owner key has not expired yet).
   */
  void setSequenceOwner(long owner, boolean serveIfMine) {
    this.serveIfMine = serveIfMine;
    sequenceOwner = owner;
  }

  void fence() {
    fenced = true;
  }

  synchronized int notOwnerAnswers() {
    return notOwnerAnswers;
  }

  synchronized int fencedAnswers() {
    return fencedAnswers;
  }

  private void answerSeq(String name, Request request) throws IOException {
    final long owner = sequenceOwner;
    final int op = Wire.Opcode.GET_SEQ.code;
    if (!name.equals(request.name())) {
      reply(TestResponses.encode(op, Wire.Status.UNKNOWN_SEQUENCE.ordinal(), node,
          request.requestId(), 0, List.of(), null));
    } else if (fenced) {
      synchronized (this) {
        ++fencedAnswers;
      }
      reply(TestResponses.encode(op, Wire.Status.FENCED.ordinal(), node, request.requestId(),
          0, List.of(), null));
    } else if (owner != node || !serveIfMine) {
      synchronized (this) {
        ++notOwnerAnswers;
      }
      reply(TestResponses.encode(op, Wire.Status.NOT_OWNER.ordinal(), node, request.requestId(),
          owner, List.of(), null));
    } else {
      final long first;
      synchronized (this) { // consecutive: issue() leaves a gap after each range
        first = nextId;
        nextId += request.count();
      }
      reply(TestResponses.encode(op, 0, node, request.requestId(), 0,
          List.of(new Wire.Range(first, request.count())), null));
    }
  }

  /** A server that checks signatures with `key` (see the file's head), then runs the handler. */
  static FakeServer signing(Key key, long firstId, Handler handler) throws SocketException {
    return new FakeServer(firstId, key, handler);
  }

  /** Signed requests dropped because their MAC did not verify. */
  synchronized int badMacs() {
    return badMacs;
  }

  /** Signed GET_IDS / GET_SEQ answered wrong_server (signed for another node id). */
  synchronized int wrongServerAnswers() {
    return wrongServerAnswers;
  }

  /** The node id in this server's answer headers (5 unless set). */
  void setNode(int node) {
    this.node = node;
  }

  /** After each wrong_server answer, the node id moves on by one (see the file's head). */
  void moveNodeOnWrongServer() {
    nodeMovesOnWrongServer = true;
  }

  /**
   * Sends the bytes as they are to the request's sender from another socket: a datagram from
   * another source port, which a client reading only from its server never sees.
   */
  void forge(byte[] datagram, int copies) throws IOException {
    try (DatagramSocket spoofer = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
      for (int i = 0; i < copies; ++i) {
        spoofer.send(new DatagramPacket(datagram, datagram.length, client));
      }
    }
  }

  /** The source port of the request being handled (the client's socket for this server). */
  int clientPort() {
    return ((InetSocketAddress) client).getPort();
  }

  /** A server that never answers. */
  static FakeServer silent() throws SocketException {
    return new FakeServer(0, (server, request, index) -> {});
  }

  String address() {
    return "127.0.0.1:" + socket.getLocalPort();
  }

  synchronized List<Request> requests() {
    return List.copyOf(requests);
  }

  /**
   * Sends a datagram to the client that sent the request being handled, signed (the answer
   * MAC appended) when that request was signed and verified by this server's key.
   */
  void reply(byte[] datagram) throws IOException {
    send(current != null && current.verified() ? sign(datagram) : datagram);
  }

  /** The answer with the MAC for the request being handled (signing() servers). */
  byte[] sign(byte[] answer) {
    return TestResponses.signed(answer, current.mac(), key);
  }

  /** Sends the bytes as they are (unsigned, or a forged MAC) to the request's sender. */
  void send(byte[] datagram) throws IOException {
    socket.send(new DatagramPacket(datagram, datagram.length, client));
  }

  /** Issues up to perRange × ranges (at most the count asked) IDs; one unused ID between ranges. */
  synchronized List<Wire.Range> issue(long count, long perRange, int ranges) {
    final List<Wire.Range> out = new ArrayList<>();
    long left = count;
    while (left > 0 && out.size() < ranges) {
      final long n = Math.min(left, perRange);
      out.add(new Wire.Range(nextId, n));
      nextId += n + 1;
      left -= n;
    }
    return out;
  }

  /** Answers like flurryd: OK with IDs for GET_IDS, OK for PING, the snowflake INFO body. */
  void answerIds(Request request, long perRange, int ranges) throws IOException {
    if (request.opcode() == Wire.Opcode.GET_IDS.code) {
      final int allowed = Math.min(ranges, Wire.rangesMax(request.size()));
      reply(TestResponses.encode(request.opcode(), 0, node, request.requestId(), 0,
          issue(request.count(), perRange, allowed), null));
    } else if (request.opcode() == Wire.Opcode.INFO.code) {
      reply(TestResponses.encode(request.opcode(), 0, node, request.requestId(), 0, List.of(),
          new Wire.Info(Layout.DEFAULT_EPOCH_MS, 1, 41, 10, 12, 0, 0, 1)));
    } else {
      reply(TestResponses.encode(request.opcode(), 0, node, request.requestId(), 0, List.of(),
          null));
    }
  }

  private void serve() {
    final byte[] buffer = new byte[2048];
    final DatagramPacket packet = new DatagramPacket(buffer, buffer.length);
    while (!stopping) {
      try {
        packet.setLength(buffer.length);
        socket.receive(packet);
      } catch (SocketTimeoutException e) {
        continue;
      } catch (IOException e) {
        return; // closed
      }
      final long received = System.nanoTime();
      final ByteBuffer header = ByteBuffer.wrap(Arrays.copyOf(buffer, packet.getLength()));
      if (packet.getLength() < Wire.REQUEST_HEADER_SIZE) continue;
      final int opcode = header.get(3) & 0xff;
      final int nameSize = packet.getLength() > Wire.REQUEST_HEADER_SIZE
          ? Math.min(buffer[Wire.REQUEST_HEADER_SIZE] & 0xff,
              packet.getLength() - Wire.REQUEST_HEADER_SIZE - 1)
          : 0;
      final String name = opcode == Wire.Opcode.GET_SEQ.code
          ? new String(buffer, Wire.REQUEST_HEADER_SIZE + 1, nameSize, StandardCharsets.US_ASCII)
          : null;
      final Trailer trailer = trailer(header, packet.getLength());
      final Request request = new Request(opcode, header.getInt(8) & 0xffffffffL,
          header.getLong(12), name, packet.getLength(), received, trailer);
      final boolean issues =
          opcode == Wire.Opcode.GET_IDS.code || opcode == Wire.Opcode.GET_SEQ.code;
      final int index;
      final boolean wrongServer;
      synchronized (this) {
        // flurryd drops it (answering would be an oracle); a server without a key takes all.
        if (key != null && trailer != null && !trailer.verified()) {
          ++badMacs;
          continue;
        }
        wrongServer = key != null && trailer != null && issues && trailer.server() != node;
        if (wrongServer) {
          ++wrongServerAnswers;
          index = -1;
        } else {
          index = requests.size();
          requests.add(request);
        }
      }
      client = packet.getSocketAddress();
      current = trailer;
      if (wrongServer) { // as flurryd: signed, naming this server's node id
        try {
          reply(TestResponses.encode(opcode, Wire.Status.UNAUTHORIZED.ordinal(), node,
              request.requestId(), Wire.WRONG_SERVER, List.of(), null));
        } catch (IOException e) {
          if (!stopping) throw new IllegalStateException("fake server reply failed", e);
        }
        if (nodeMovesOnWrongServer) node = node + 1;
        continue;
      }
      try {
        handler.handle(this, request, index);
      } catch (IOException e) {
        if (!stopping) throw new IllegalStateException("fake server reply failed", e);
      }
    }
  }

  // The trailer of a datagram with FLAG_AUTH and room for it, checked against this server's key
  // (never verified without one).
  private Trailer trailer(ByteBuffer datagram, int length) {
    if ((datagram.getShort(4) & Wire.FLAG_AUTH) == 0 || length < Auth.SIGNED_REQUEST_SIZE_MIN) {
      return null;
    }
    final int at = length - Auth.TRAILER_SIZE;
    final long mac = datagram.getLong(at + 16);
    final boolean verified =
        key != null && Auth.mac(key, datagram.array(), 0, length - Auth.MAC_SIZE) == mac
            && (datagram.getInt(at) & 0xffffffffL) == key.id();
    return new Trailer(datagram.getInt(at) & 0xffffffffL, datagram.getInt(at + 4) & 0xffffffffL,
        datagram.getLong(at + 8), mac, verified);
  }

  @Override
  public void close() {
    stopping = true;
    try {
      thread.join(2_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    socket.close();
  }
}
