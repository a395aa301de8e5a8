// client/java/.../QuickstartTest.java — README.md's quick start, run as written against a real
// flurryd (binary from env FLURRYD) that the test starts on a free loopback port (never 7420):
// the test takes the README's one ```sh block under "## Quick start", applies only these
// substitutions (each must match exactly once, so the README and the test cannot drift apart
// unnoticed), and runs it with bash -e:
//   * 127.0.0.1:7420 -> the test server's address;
//   * cd client/java -> cd into this client's directory (the README starts at the repository root);
//   * /tmp/Quickstart.java -> a file in the test's own directory;
//   * the mvn line gets -Dmaven.repo.local and -Dflurry.target in the test's own directory (so
//     parallel tests never share a build, and nothing is written to ~/.m2 or the source tree)
//     and -DskipTests (the tests are java_maven's and the tiers' business: here only the
//     package matters), and the jar path follows -Dflurry.target.
// Then every line it prints must be "ID BASE32 UUID" for 5 IDs, every ID unique, of the test
// server's node, its base32 and uuid forms those of the ID. Bounded (a process timeout);
// flurryd is killed by PID and its files removed.
// The quick start keeps the client's defaults (5 attempts of 100 ms), and a fresh JVM on a
// loaded machine (its JIT threads beside the other suites) can miss all five: the client then
// says NO_ANSWER, as its contract says, and that says the machine was slow, not that the quick
// start is wrong. Such a run is run again, at most RUNS times in all; any other failure fails
// at once.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Tag("quickstart")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class QuickstartTest {
  // Not the node ids of the other integration tests (1, 2, 9): no two share a node on the host.
  private static final int NODE_ID = 31;
  private static final Duration RUN_TIMEOUT = Duration.ofSeconds(480);
  private static final int RUNS = 3;

  /** The first ```sh block after the line "## Quick start" in README.md. */
  static String quickstartBlock(String readme) {
    final int section = readme.indexOf("\n## Quick start\n");
    assertTrue(section >= 0, "README.md has no '## Quick start' section");
    final int open = readme.indexOf("\n```sh\n", section);
    assertTrue(open >= 0, "no ```sh block in the quick start");
    final int start = open + "\n```sh\n".length();
    final int close = readme.indexOf("\n```\n", start);
    assertTrue(close >= 0, "the quick start's ```sh block is not closed");
    return readme.substring(start, close + 1);
  }

  static String replaceOnce(String text, String from, String to) {
    final int at = text.indexOf(from);
    assertTrue(at >= 0, "the quick start no longer has '" + from + "'");
    assertEquals(-1, text.indexOf(from, at + 1), "the quick start has '" + from + "' twice");
    return text.substring(0, at) + to + text.substring(at + from.length());
  }

  @Test
  void theReadmesQuickStartRunsAsWritten() throws Exception {
    final Path clientDir = Paths.clientDir();
    final String outText = System.getProperty("flurry.out_dir", "");
    final Path out = (outText.isEmpty() ? Files.createTempDirectory("flurry-java-quickstart-")
        : Path.of(outText)).toAbsolutePath();
    final Path work = Files.createDirectories(out.resolve("quickstart"));
    final String readme = Files.readString(clientDir.resolve("README.md"), StandardCharsets.UTF_8);
    try (Flurryd flurryd = Flurryd.start(NODE_ID)) {
      String script = quickstartBlock(readme);
      script = replaceOnce(script, "127.0.0.1:7420", flurryd.address);
      script = replaceOnce(script, "cd client/java\n", "cd '" + clientDir + "'\n");
      script = replaceOnce(script, "/tmp/Quickstart.java <<", work + "/Quickstart.java <<");
      script = replaceOnce(script, " /tmp/Quickstart.java\n", " " + work + "/Quickstart.java\n");
      script = replaceOnce(script, "mvn -o -q -s maven-settings.xml package",
          "mvn -o -q -s maven-settings.xml package -DskipTests -Dmaven.repo.local='" + work
              + "/m2' -Dflurry.target='" + work + "/target'");
      script = replaceOnce(script, "-cp target/", "-cp '" + work + "/target'/");
      Files.writeString(work.resolve("quickstart.sh"), script);
      final List<String> slowRuns = new ArrayList<>();
      Process process;
      for (int run = 1;; ++run) {
        process = new ProcessBuilder("bash", "-e", work.resolve("quickstart.sh").toString())
            .redirectErrorStream(false)
            .redirectError(work.resolve("stderr.txt").toFile())
            .redirectOutput(work.resolve("stdout.txt").toFile()).start();
        if (!process.waitFor(RUN_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
          process.destroyForcibly();
          process.waitFor(10, TimeUnit.SECONDS);
          throw new AssertionError("the quick start ran longer than " + RUN_TIMEOUT);
        }
        final String failed = Files.readString(work.resolve("stderr.txt"));
        if (process.exitValue() == 0 || run == RUNS || !failed.contains("FlurryException(NO_ANSWER)")) {
          break;
        }
        slowRuns.add(failed);
      }
      if (!slowRuns.isEmpty()) {
        System.out.println("quick start: " + slowRuns.size() + " run(s) ended NO_ANSWER on a slow "
            + "machine and ran again; the first:\n" + slowRuns.get(0));
      }
      // Debian's mvn ends with an ANSI reset (ESC [0m) on stdout even with -q, -B or
      // -Dstyle.color=never: a terminal shows it as nothing, so it is read as a person sees it.
      final List<String> lines = new ArrayList<>();
      for (String line : Files.readAllLines(work.resolve("stdout.txt"))) {
        final String seen = line.replaceAll("\u001B\\[[0-9;]*m", "");
        if (!seen.isEmpty()) lines.add(seen);
      }
      final String stderr = Files.readString(work.resolve("stderr.txt"));
      assertEquals(0, process.exitValue(), "the quick start failed:\n" + script + "\nstdout:\n"
          + String.join("\n", lines) + "\nstderr:\n" + stderr + "\nflurryd:\n"
          + flurryd.logTail());
      System.out.println(String.join("\n", lines));
      final Layout layout;
      try (FlurryClient probe = FlurryClient.builder().servers(flurryd.address)
          .timeout(Duration.ofSeconds(5)).build()) { // must be answered, however loaded
        layout = probe.layout();
      }
      assertEquals(5, lines.size(), "lines printed: " + lines);
      final Set<Long> ids = new HashSet<>();
      for (String line : lines) {
        final String[] fields = line.split(" ");
        assertEquals(3, fields.length, "not ID BASE32 UUID: " + line);
        final long id = Forms.parseDec(fields[0]);
        assertTrue(ids.add(id), "a duplicate ID: " + id);
        assertEquals(NODE_ID, layout.decode(id).node(), "node of " + id);
        assertEquals(Forms.base32(id), fields[1], line);
        assertEquals(Forms.uuid(layout, id), fields[2], line);
      }
    }
  }
}
