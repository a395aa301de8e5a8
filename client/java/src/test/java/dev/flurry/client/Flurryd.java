// client/java/.../Flurryd.java — test-only: one real flurryd process (binary from env
// FLURRYD) in local mode on 127.0.0.1, with a fresh state dir, for the integration test and the
// benchmark.
//
// Contract: start() returns once the process answers PING (bounded), or kills it and throws
// with its log tail. kill() sends SIGKILL to its PID and reaps it; close() kills (if still
// running) and removes the temp dir. A JVM shutdown hook kills every flurryd still running, so
// a test that is itself killed (meson's timeout sends SIGTERM) leaves none behind.
package dev.flurry.client;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

final class Flurryd implements AutoCloseable {
  private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();
  // Ends only a wait for a flurryd that never serves: a sanitizer build on a loaded machine may
  // take many seconds to start.
  private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
  // Another worktree's tests may hold the same node id on this host for a while (flurryd
  // refuses a node id already served here): wait for it, bounded.
  private static final Duration NODE_BUSY_WAIT = Duration.ofSeconds(120);

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      for (Process process : RUNNING) process.destroyForcibly();
    }));
  }

  final int nodeId;
  final String address;
  private final Path dir;
  private final Process process;

  private Flurryd(int nodeId, String address, Path dir, Process process) {
    this.nodeId = nodeId;
    this.address = address;
    this.dir = dir;
    this.process = process;
  }

  static Path binary() {
    final String path = System.getenv("FLURRYD");
    if (path == null || path.isEmpty() || !Files.isExecutable(Path.of(path))) {
      throw new IllegalStateException("FLURRYD='" + path + "' is not an executable flurryd; "
          + "meson test sets it (build flurryd first: ninja -C build)");
    }
    return Path.of(path);
  }

  // Every port freeUdpPort gave: never twice in one JVM. A test starting two flurryds asks for
  // both ports before either binds, and the kernel's random pick may repeat.
  private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();

  static int freeUdpPort() throws IOException {
    for (int tries = 0; tries < 1000; ++tries) {
      try (DatagramSocket socket = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
        if (HANDED_OUT.add(socket.getLocalPort())) return socket.getLocalPort();
      }
    }
    throw new IOException("1000 ports picked on 127.0.0.1, each one handed out before");
  }

  /** Starts a new node (--init) and waits until it answers PING. */
  static Flurryd start(int nodeId) throws IOException, InterruptedException {
    return start(nodeId, List.of());
  }

  /** As start(nodeId), with more flags (e.g. --auth required --key-file F). */
  static Flurryd start(int nodeId, List<String> flags) throws IOException, InterruptedException {
    final long busyDeadline = System.nanoTime() + NODE_BUSY_WAIT.toNanos();
    for (int tries = 1; ; ++tries) {
      final Path dir = Files.createTempDirectory("flurry-java-node" + nodeId + "-");
      final String address = "127.0.0.1:" + freeUdpPort();
      final Path log = dir.resolve("flurryd.log");
      final List<String> command = new ArrayList<>(List.of(binary().toString(), "--init",
          "--state-dir", dir.resolve("state").toString(), "--listen", address,
          "--control-socket", dir.resolve("ctl.sock").toString(), "--node-id",
          Integer.toString(nodeId)));
      command.addAll(flags);
      final Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      RUNNING.add(process);
      final Flurryd flurryd = new Flurryd(nodeId, address, dir, process);
      final String failure = flurryd.awaitPing();
      if (failure == null) return flurryd;
      flurryd.close();
      if (failure.contains("already served on this host") && System.nanoTime() < busyDeadline) {
        System.err.println("flurryd node " + nodeId + " busy on this host (try " + tries
            + "), waiting: " + failure.lines().reduce((a, b) -> b).orElse(""));
        Thread.sleep(2_000);
        continue;
      }
      throw new IllegalStateException("flurryd --node-id " + nodeId + " on " + address
          + " did not answer PING within " + START_TIMEOUT.toSeconds() + " s:\n" + failure);
    }
  }

  // Null once PING is answered; else the log tail (the process exited or never answered).
  private String awaitPing() throws IOException, InterruptedException {
    final long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    try (FlurryClient probe = FlurryClient.builder().servers(address)
        .timeout(Duration.ofMillis(100)).attempts(1).build()) {
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) return "exited with " + process.exitValue() + ":\n" + logTail();
        try {
          probe.ping();
          return null;
        } catch (FlurryException e) {
          Thread.sleep(50);
        }
      }
    }
    return "no answer:\n" + logTail();
  }

  String logTail() throws IOException {
    final Path log = dir.resolve("flurryd.log");
    if (!Files.exists(log)) return "(no log)";
    final List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
    return String.join("\n", lines.subList(Math.max(0, lines.size() - 15), lines.size()));
  }

  long pid() {
    return process.pid();
  }

  /** SIGKILL to the PID (Process.destroyForcibly on Linux), then reaps it, bounded. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    if (!process.waitFor(10, TimeUnit.SECONDS)) {
      throw new IllegalStateException("flurryd pid " + pid() + " survived SIGKILL for 10 s");
    }
    RUNNING.remove(process);
  }

  @Override
  public void close() throws IOException {
    try {
      if (process.isAlive() || RUNNING.contains(process)) kill();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // SIGKILL was sent; the shutdown hook repeats it
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(path);
      }
    }
  }
}
