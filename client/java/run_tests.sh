#!/usr/bin/env bash
# client/java/run_tests.sh OUT_DIR TAG [PROTOCOL_MD] — compiles the Java client and its tests
# into OUT_DIR (wiped first) and runs the JUnit 5 tests tagged TAG with the console launcher of
# Debian's junit5: vectors (PROTOCOL.md's vectors, client/forms-vectors.json, the version),
# behaviour (fake servers, key files), integration (real flurryd processes), quickstart
# (README.md's quick start run as written: Maven packages the jar, a real flurryd serves it).
# TAG `bench` runs the benchmark (Bench.java: one flurryd from FLURRYD) instead of tests.
# Exits non-zero when a test failed, when none ran (--fail-if-no-tests), or when the toolchain
# is missing: a missing JDK or junit5 fails, it never skips. PROTOCOL_MD is proto/PROTOCOL.md
# for the vectors; the forms vectors are FLURRY_FORMS_VECTORS, else ../forms-vectors.json
# beside this client; integration and quickstart read FLURRYD (the flurryd binary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_tests.sh OUT_DIR TAG [PROTOCOL_MD]}
tag=${2:?usage: run_tests.sh OUT_DIR TAG [PROTOCOL_MD]}
protocol=${3:-}
junit=/usr/share/java/junit-platform-console-standalone.jar

for tool in javac java; do
  if ! command -v "$tool" >/dev/null; then
    echo "run_tests: $tool not found: install the Debian package default-jdk-headless (scripts/setup does)" >&2
    exit 1
  fi
done
if [[ ! -f "$junit" ]]; then
  echo "run_tests: $junit not found: install the Debian package junit5 (scripts/setup does)" >&2
  exit 1
fi
version=$(javac -version 2>&1 | sed -E 's/^javac ([0-9]+).*/\1/')
if [[ ! "$version" =~ ^[0-9]+$ ]] || ((version < 17)); then
  echo "run_tests: javac $version is older than 17: install the Debian package default-jdk-headless" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out/classes"
mapfile -t sources < <(find "$here/src" -name '*.java' | sort)
javac -Xlint:all -Werror -encoding UTF-8 -d "$out/classes" -cp "$junit" "${sources[@]}"
if [[ "$tag" == bench ]]; then
  exec java -cp "$out/classes" dev.flurry.client.Bench
fi
exec java -Dflurry.protocol_md="$protocol" -Dflurry.client_dir="$here" -Dflurry.out_dir="$out" \
  -jar "$junit" \
  --class-path "$out/classes" --scan-class-path "$out/classes" --include-tag "$tag" \
  --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree --reports-dir "$out/reports"
