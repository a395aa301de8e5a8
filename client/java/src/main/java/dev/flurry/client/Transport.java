// client/java/.../Transport.java — internal: the client's UDP sockets, one per server, each
// connected to its server, and the shutdown signal (the C++ client/transport.cc).
//
// Contract:
//   * open() parses every "HOST:PORT" and resolves HOST once to an IPv4 address, then opens
//     one DatagramChannel per server, connected to it (DatagramChannel.connect): the kernel
//     then delivers to it only datagrams whose source is that server's address and port, so
//     an answer is only ever read from the server asked (PROTOCOL.md "What a client can be
//     sure of"). It throws INVALID_ARGUMENT, RESOLVE_FAILED or SYSTEM as
//     FlurryClient.Builder.build documents.
//   * Each channel is non-blocking and registered with a Selector of its own: tryReceive()
//     never waits (a polling caller spins on it); receive() blocks in that server's selector
//     for at most the given time, as the C++ client polls its socket and wake fd. An ICMP port
//     unreachable for a server shows on its channel alone, as a failed read (no datagram).
//   * close() makes every wait (receive, pause) end at once with SHUTTING_DOWN, from any
//     thread; an interrupted thread's wait ends with SHUTTING_DOWN ("interrupted"). send() and
//     the receives are serialized by the caller (one outstanding request).
package dev.flurry.client;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

final class Transport implements AutoCloseable {
  // receive() only needs select() to return; the key needs no handling.
  private static final Consumer<SelectionKey> IGNORE_KEY = key -> {};

  private final List<String> names;
  // One each per server, in the order of names: connected to that server.
  private final List<DatagramChannel> channels;
  private final List<Selector> selectors;
  private final CountDownLatch closed = new CountDownLatch(1);
  // Direct: a heap buffer would be copied through a temporary direct one on every call.
  private final ByteBuffer sendBuffer = ByteBuffer.allocateDirect(Wire.DATAGRAM_SIZE_MAX);
  private final ByteBuffer receiveBuffer = ByteBuffer.allocateDirect(Wire.DATAGRAM_SIZE_MAX + 1);
  // Waits that found no datagram and blocked in the selector, and looks (tryReceive) that
  // found none: tests read them to tell a polling wait from a blocking one.
  final AtomicLong blockedWaits = new AtomicLong();
  final AtomicLong emptyLooks = new AtomicLong();

  private Transport(List<String> names, List<DatagramChannel> channels,
      List<Selector> selectors) {
    this.names = names;
    this.channels = channels;
    this.selectors = selectors;
  }

  static Transport open(List<String> servers) throws FlurryException {
    final List<InetSocketAddress> addresses = new ArrayList<>(servers.size());
    for (String server : servers) addresses.add(resolve(server));
    final List<DatagramChannel> channels = new ArrayList<>(servers.size());
    final List<Selector> selectors = new ArrayList<>(servers.size());
    for (int i = 0; i < addresses.size(); ++i) {
      DatagramChannel channel = null;
      Selector selector = null;
      try {
        channel = DatagramChannel.open();
        channels.add(channel);
        // Connected: the kernel delivers only this server's datagrams to it. Sends nothing.
        channel.connect(addresses.get(i));
        channel.configureBlocking(false);
        selector = Selector.open();
        selectors.add(selector);
        channel.register(selector, SelectionKey.OP_READ);
      } catch (IOException | RuntimeException e) {
        for (Selector opened : selectors) closeQuietly(opened);
        for (DatagramChannel opened : channels) closeQuietly(opened);
        throw new FlurryException(FlurryException.Code.SYSTEM, "cannot open a UDP socket"
            + " connected to server '" + servers.get(i) + "': " + e.getMessage());
      }
    }
    return new Transport(List.copyOf(servers), List.copyOf(channels), List.copyOf(selectors));
  }

  private static InetSocketAddress resolve(String server) throws FlurryException {
    final int colon = server.lastIndexOf(':');
    int port = -1;
    if (colon > 0) {
      try {
        port = Integer.parseInt(server.substring(colon + 1));
      } catch (NumberFormatException e) {
        port = -1;
      }
    }
    if (port < 1 || port > 65535) {
      throw new FlurryException(FlurryException.Code.INVALID_ARGUMENT,
          "server '" + server + "' is not HOST:PORT with a port 1..65535");
    }
    final String host = server.substring(0, colon);
    try {
      for (InetAddress address : InetAddress.getAllByName(host)) {
        if (address instanceof Inet4Address) return new InetSocketAddress(address, port);
      }
    } catch (UnknownHostException e) {
      // reported below, as for a name without an IPv4 address
    }
    throw new FlurryException(FlurryException.Code.RESOLVE_FAILED,
        "cannot resolve '" + host + "' (server " + server + ") to an IPv4 address");
  }

  int serverCount() {
    return names.size();
  }

  /** "HOST:PORT" as given. */
  String name(int server) {
    return names.get(server);
  }

  /** The local port of the socket connected to {@code server} (tests aim forged answers at it). */
  int localPort(int server) {
    try {
      return ((InetSocketAddress) channels.get(server).getLocalAddress()).getPort();
    } catch (IOException e) {
      return -1;
    }
  }

  boolean isClosed() {
    return closed.getCount() == 0;
  }

  /** Sends to {@code server}; null on success, else why not. Throws SHUTTING_DOWN once closed. */
  String send(int server, byte[] datagram, int length) throws FlurryException {
    sendBuffer.clear();
    sendBuffer.put(datagram, 0, length).flip();
    try {
      // Non-blocking: 0 when the socket's send buffer has no room, where a blocking socket
      // would wait. With one request outstanding that is a host in trouble: a failed attempt.
      if (channels.get(server).write(sendBuffer) == 0) {
        return "the socket's send buffer is full";
      }
      return null;
    } catch (IOException e) {
      if (isClosed()) throw shuttingDown();
      return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }
  }

  /**
   * Receives one datagram from {@code server} into {@code buffer} if one is queued, without
   * waiting; its length, or -1 when none is. A datagram longer than {@code buffer} is cut to
   * its length. Throws SHUTTING_DOWN once closed.
   */
  int tryReceive(int server, byte[] buffer) throws FlurryException {
    if (isClosed()) throw shuttingDown();
    receiveBuffer.clear().limit(Math.min(buffer.length, receiveBuffer.capacity()));
    try {
      if (channels.get(server).read(receiveBuffer) <= 0 && receiveBuffer.position() == 0) {
        emptyLooks.incrementAndGet();
        return -1;
      }
    } catch (IOException e) {
      // PortUnreachableException (an ICMP answer to an earlier send: reading clears it) or a
      // transient socket error: this attempt waits on, the deadline bounds it.
      if (isClosed()) throw shuttingDown();
      emptyLooks.incrementAndGet();
      return -1;
    }
    final int length = receiveBuffer.position();
    receiveBuffer.flip().get(buffer, 0, length);
    return length;
  }

  /**
   * As tryReceive, but when nothing is queued blocks until a datagram from {@code server}
   * arrives or {@code waitNanos} pass; -1 when none came in time. Throws SHUTTING_DOWN once
   * closed or when the thread is interrupted.
   */
  int receive(int server, byte[] buffer, long waitNanos) throws FlurryException {
    final int length = tryReceive(server, buffer);
    if (length >= 0) return length;
    blockedWaits.incrementAndGet();
    // select() counts whole milliseconds (0 would mean forever): round up.
    final long waitMs = Math.max(1, (waitNanos + 999_999) / 1_000_000);
    try {
      selectors.get(server).select(IGNORE_KEY, waitMs);
    } catch (ClosedSelectorException e) {
      throw shuttingDown();
    } catch (IOException e) {
      if (isClosed()) throw shuttingDown();
      return -1; // as a transient socket error
    }
    // An interrupt makes every select() return at once: end the wait rather than spin.
    if (Thread.currentThread().isInterrupted()) throw interrupted();
    return tryReceive(server, buffer);
  }

  /** Sleeps {@code nanos}; throws SHUTTING_DOWN at once when closed. */
  void pause(long nanos) throws FlurryException {
    try {
      if (closed.await(nanos, TimeUnit.NANOSECONDS)) throw shuttingDown();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw interrupted();
    }
  }

  static FlurryException shuttingDown() {
    return new FlurryException(FlurryException.Code.SHUTTING_DOWN, "the client is closed");
  }

  // The thread's interrupt flag stays set for its caller.
  private static FlurryException interrupted() {
    return new FlurryException(FlurryException.Code.SHUTTING_DOWN, "interrupted");
  }

  @Override
  public void close() {
    closed.countDown();
    // A thread in select() returns (and sees `closed`); closing the selector waits for it.
    for (Selector selector : selectors) {
      selector.wakeup();
      closeQuietly(selector);
    }
    for (DatagramChannel channel : channels) closeQuietly(channel);
  }

  private static void closeQuietly(AutoCloseable closeable) {
    if (closeable == null) return;
    try {
      closeable.close();
    } catch (Exception e) {
      // closing: nothing is left to use it
    }
  }
}
