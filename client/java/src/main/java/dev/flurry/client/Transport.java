// client/java/.../Transport.java — internal: the client's one unconnected UDP socket, its
// resolved servers, and the shutdown signal.
//
// Contract:
//   * open() parses every "HOST:PORT" and resolves HOST once to an IPv4 address; it throws
//     INVALID_ARGUMENT, RESOLVE_FAILED or SYSTEM as FlurryClient.Builder.build documents.
//   * receive() waits at most the given time; close() makes every wait (receive, pause) end at
//     once with SHUTTING_DOWN, from any thread. send() and receive() are serialized by the
//     caller (one outstanding request).
package dev.flurry.client;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

final class Transport implements AutoCloseable {
  private final List<String> names;
  private final List<InetSocketAddress> addresses;
  private final DatagramSocket socket;
  private final CountDownLatch closed = new CountDownLatch(1);
  private final DatagramPacket sendPacket = new DatagramPacket(new byte[0], 0);
  private final DatagramPacket receivePacket = new DatagramPacket(new byte[0], 0);

  private Transport(List<String> names, List<InetSocketAddress> addresses, DatagramSocket socket) {
    this.names = names;
    this.addresses = addresses;
    this.socket = socket;
  }

  static Transport open(List<String> servers) throws FlurryException {
    List<InetSocketAddress> addresses = new ArrayList<>(servers.size());
    for (String server : servers) addresses.add(resolve(server));
    try {
      DatagramSocket socket = new DatagramSocket(new InetSocketAddress("0.0.0.0", 0));
      return new Transport(List.copyOf(servers), addresses, socket);
    } catch (SocketException e) {
      throw new FlurryException(FlurryException.Code.SYSTEM,
          "cannot open a UDP socket: " + e.getMessage());
    }
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
    return addresses.size();
  }

  /** "HOST:PORT" as given. */
  String name(int server) {
    return names.get(server);
  }

  boolean isClosed() {
    return closed.getCount() == 0;
  }

  /** Sends; null on success, else why not. Throws SHUTTING_DOWN once closed. */
  String send(int server, byte[] datagram, int length) throws FlurryException {
    sendPacket.setData(datagram, 0, length);
    sendPacket.setSocketAddress(addresses.get(server));
    try {
      socket.send(sendPacket);
      return null;
    } catch (IOException e) {
      if (isClosed()) throw shuttingDown();
      return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }
  }

  /**
   * Receives one datagram into {@code buffer} within {@code waitNanos}; its length, or -1 when
   * none came in time. Throws SHUTTING_DOWN once closed.
   */
  int receive(byte[] buffer, long waitNanos) throws FlurryException {
    if (isClosed()) throw shuttingDown();
    // SO_TIMEOUT counts whole milliseconds (0 would mean forever): round up.
    final long waitMs = Math.max(1, (waitNanos + 999_999) / 1_000_000);
    receivePacket.setData(buffer, 0, buffer.length);
    try {
      socket.setSoTimeout((int) Math.min(waitMs, Integer.MAX_VALUE));
      socket.receive(receivePacket);
      return receivePacket.getLength();
    } catch (SocketTimeoutException e) {
      return -1;
    } catch (IOException e) {
      if (isClosed()) throw shuttingDown();
      return -1; // a transient socket error: this attempt waits on, the deadline bounds it
    }
  }

  /** Sleeps {@code nanos}; throws SHUTTING_DOWN at once when closed. */
  void pause(long nanos) throws FlurryException {
    try {
      if (closed.await(nanos, TimeUnit.NANOSECONDS)) throw shuttingDown();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new FlurryException(FlurryException.Code.SHUTTING_DOWN, "interrupted");
    }
  }

  static FlurryException shuttingDown() {
    return new FlurryException(FlurryException.Code.SHUTTING_DOWN, "the client is closed");
  }

  @Override
  public void close() {
    closed.countDown();
    socket.close();
  }
}
