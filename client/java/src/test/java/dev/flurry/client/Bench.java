// client/java/.../Bench.java — a small bounded benchmark against one local flurryd (env
// FLURRYD, started here; or a running one named by the environment variable
// FLURRY_SERVER=HOST:PORT): get(1) with one request in flight (requests/s, p50/p99/p99.9 latency), then IDs/s
// through the prefetch buffer (one and two consumer threads) and through get(4096) batches.
// FLURRY_POLL_US (0..10000, default 0) is Builder.poll of the one-in-flight client; that
// phase checks its IDs for duplicates and fails on one.
// Run: FLURRYD=build/control/flurryd bash client/java/run_tests.sh /tmp/flurry-java-bench bench
// Figures, not assertions: the numbers depend on the machine and what else runs on it.
package dev.flurry.client;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

public final class Bench {
  private static final int WARMUP = 5_000;
  private static final int REQUESTS = 50_000;
  private static final int PREFETCH_IDS = 10_000_000;

  private Bench() {}

  public static void main(String[] args) throws Exception {
    final String running = System.getenv("FLURRY_SERVER");
    if (running != null) {
      run(running);
      return;
    }
    try (Flurryd server = Flurryd.start(1)) {
      System.out.println("flurryd pid " + server.pid() + " on " + server.address);
      run(server.address);
    }
  }

  private static void run(String address) throws Exception {
    System.out.println("server " + address + "; " + Runtime.getRuntime().availableProcessors()
        + " CPUs; java " + System.getProperty("java.version"));
    single(address, pollFromEnvironment());
    prefetch(address, 1);
    prefetch(address, 2);
    batches(address);
  }

  // Builder.poll checks the bounds; only the number is read here.
  private static Duration pollFromEnvironment() {
    final String text = System.getenv().getOrDefault("FLURRY_POLL_US", "0");
    try {
      return Duration.ofNanos(Long.parseLong(text) * 1_000);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("FLURRY_POLL_US '" + text
          + "' is not a whole number of microseconds (0..10000)", e);
    }
  }

  private static void single(String address, Duration poll) throws Exception {
    try (FlurryClient flurry = FlurryClient.builder().servers(address).poll(poll).build()) {
      final long[] ids = new long[WARMUP + REQUESTS];
      for (int i = 0; i < WARMUP; ++i) ids[i] = flurry.get(1)[0];
      final long[] latency = new long[REQUESTS];
      final long start = System.nanoTime();
      for (int i = 0; i < REQUESTS; ++i) {
        final long sent = System.nanoTime();
        ids[WARMUP + i] = flurry.get(1)[0];
        latency[i] = System.nanoTime() - sent;
      }
      final double seconds = (System.nanoTime() - start) / 1e9;
      Arrays.sort(latency);
      Arrays.sort(ids);
      int duplicates = 0;
      for (int i = 1; i < ids.length; ++i) duplicates += ids[i] == ids[i - 1] ? 1 : 0;
      System.out.printf("get(1), one in flight, poll %d us: %d requests in %.2f s = %.0f "
              + "requests/s; latency p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us; "
              + "timeouts %d; %d IDs, %d duplicates%n",
          poll.toNanos() / 1_000, REQUESTS, seconds, REQUESTS / seconds,
          latency[REQUESTS / 2] / 1e3, latency[REQUESTS * 99 / 100] / 1e3,
          latency[REQUESTS * 999 / 1000] / 1e3, latency[REQUESTS - 1] / 1e3,
          flurry.counters().timeouts(), ids.length, duplicates);
      if (duplicates != 0) throw new IllegalStateException(duplicates + " duplicate IDs");
    }
  }

  private static void prefetch(String address, int threads) throws Exception {
    try (FlurryClient flurry = FlurryClient.builder().servers(address).prefetch(65_536)
        .build()) {
      for (int i = 0; i < WARMUP * 20; ++i) flurry.next();
      final ExecutorService pool = Executors.newFixedThreadPool(threads);
      final long start = System.nanoTime();
      final Future<?>[] done = new Future<?>[threads];
      for (int t = 0; t < threads; ++t) {
        done[t] = pool.submit(() -> {
          for (int i = 0; i < PREFETCH_IDS / threads; ++i) flurry.next();
          return null;
        });
      }
      for (Future<?> future : done) future.get(120, TimeUnit.SECONDS);
      final double seconds = (System.nanoTime() - start) / 1e9;
      pool.shutdown();
      System.out.printf("next() through prefetch(65536), %d thread(s): %d IDs in %.2f s = %.2f M IDs/s "
              + "(%s)%n", threads, PREFETCH_IDS, seconds, PREFETCH_IDS / seconds / 1e6,
          flurry.counters());
    }
  }

  private static void batches(String address) throws Exception {
    try (FlurryClient flurry = FlurryClient.builder().servers(address).build()) {
      final int calls = 1_000;
      final long start = System.nanoTime();
      for (int i = 0; i < calls; ++i) flurry.get(4096);
      final double seconds = (System.nanoTime() - start) / 1e9;
      System.out.printf("get(4096), one in flight: %d IDs in %.2f s = %.2f M IDs/s, %d requests%n",
          calls * 4096, seconds, calls * 4096 / seconds / 1e6, flurry.counters().requests());
    }
  }
}
