// client/java/.../VersionTest.java — the client's version is the project's: FlurryClient.VERSION,
// the Maven artifact's version in pom.xml (dev.flurry:flurry-client) and the file VERSION at the
// repository root (../../VERSION relative to client/java) all agree.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("vectors")
class VersionTest {
  @Test
  void theVersionIsTheProjects() throws Exception {
    final String project = Files.readString(Paths.clientDir().resolve("../../VERSION"),
        StandardCharsets.UTF_8).strip();
    assertTrue(project.matches("[0-9]+\\.[0-9]+\\.[0-9]+"), "VERSION: " + project);
    assertEquals(project, FlurryClient.VERSION, "FlurryClient.VERSION vs ../../VERSION");
    // The project's own coordinates: the first groupId, artifactId and version of pom.xml,
    // outside <parent>, <dependencies> and <build> (the pom has none of them before).
    final String pom = Files.readString(Paths.clientDir().resolve("pom.xml"),
        StandardCharsets.UTF_8);
    final Matcher coordinates = Pattern.compile("<groupId>([^<]+)</groupId>\\s*"
        + "<artifactId>([^<]+)</artifactId>\\s*<version>([^<]+)</version>").matcher(pom);
    assertTrue(coordinates.find(), "no groupId, artifactId, version in pom.xml");
    assertEquals("dev.flurry", coordinates.group(1));
    assertEquals("flurry-client", coordinates.group(2));
    assertEquals(project, coordinates.group(3), "pom.xml's version vs ../../VERSION");
    assertTrue(pom.indexOf("<parent>") < 0 || pom.indexOf("<parent>") > coordinates.start(),
        "a <parent> before the coordinates");
  }
}
