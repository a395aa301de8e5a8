// client/java/.../Paths.java — test-only: where the client's directory (client/java) and the
// files the tests read relative to it are. run_tests.sh passes -Dflurry.client_dir; under
// Maven the tests run in the project's directory, which is the same place.
package dev.flurry.client;

import java.nio.file.Path;

final class Paths {
  private Paths() {}

  static Path clientDir() {
    final String dir = System.getProperty("flurry.client_dir", "");
    return (dir.isEmpty() ? Path.of("") : Path.of(dir)).toAbsolutePath().normalize();
  }

  /** FLURRY_FORMS_VECTORS, else ../forms-vectors.json relative to the client's directory. */
  static Path formsVectors() {
    final String env = System.getenv("FLURRY_FORMS_VECTORS");
    if (env != null && !env.isEmpty()) return Path.of(env);
    return clientDir().resolve("../forms-vectors.json").normalize();
  }
}
