// client/java/.../Eventually.java — test-only: bounded polls for what another thread (a fake
// server's, a refill thread, a call running on a pool thread) does at its own pace. On a
// loaded machine that thread may lag behind the test's by many milliseconds, so a test reads
// such a value only once it has settled, or once a generous deadline has passed (then the
// test's assertion fails naming the value seen). Nothing here asserts how long a wait took.
package dev.flurry.client;

import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;

final class Eventually {
  /** Far beyond any scheduling delay; reached only when the awaited thing never happens. */
  static final long DEADLINE_NANOS = 10_000_000_000L;

  private Eventually() {}

  /** Polls until `condition` holds (true) or the deadline passes (false). */
  static boolean holds(BooleanSupplier condition) throws InterruptedException {
    final long deadline = System.nanoTime() + DEADLINE_NANOS;
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) return false;
      Thread.sleep(1);
    }
    return true;
  }

  /**
   * The value once it equals `expected`, or the value at the deadline: for a count another
   * thread raises towards `expected` (e.g. requests a silent fake server records after the
   * client gave up on them), to be checked with assertEquals.
   */
  static int reaches(IntSupplier value, int expected) throws InterruptedException {
    holds(() -> value.getAsInt() == expected);
    return value.getAsInt();
  }

  /** Whether `thread` is inside Exchange.await: waiting for an answer, blocked or polling. */
  static boolean inAwait(Thread thread) {
    for (StackTraceElement frame : thread.getStackTrace()) {
      if (frame.getClassName().equals(Exchange.class.getName())
          && frame.getMethodName().equals("await")) {
        return true;
      }
    }
    return false;
  }
}
