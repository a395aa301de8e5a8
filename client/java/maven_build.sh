#!/usr/bin/env bash
# client/java/maven_build.sh OUT_DIR — the Maven build of the client, offline, as a user runs
# it (README "Install"): `mvn -o -s maven-settings.xml package` compiles, runs the unit tiers
# with surefire and JUnit 5 (tags vectors, behaviour) and packages the jar, with Debian's Maven
# and plugins only (/usr/share/maven-repo; nothing is downloaded). The local repository and the
# build directory are kept in OUT_DIR (wiped first), so parallel runs share nothing and nothing
# is written to ~/.m2 or the source tree. Then checks the jar: named for VERSION, holding the
# client's classes, its manifest's Implementation-Version VERSION. A missing mvn or plugin
# fails naming the Debian packages (scripts/setup installs them); it never skips.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: maven_build.sh OUT_DIR}
packages="maven libmaven-compiler-plugin-java libmaven-resources-plugin-java libmaven-jar-plugin-java libmaven-install-plugin-java libsurefire-java junit5"
if ! command -v mvn >/dev/null; then
  echo "maven_build: mvn not found: install the Debian packages $packages (scripts/setup does)" >&2
  exit 1
fi
for plugin in maven-compiler-plugin/3.10.1 maven-resources-plugin/3.3.0 maven-jar-plugin/3.3.0 \
    maven-install-plugin/3.1.0 maven-surefire-plugin/2.22.3; do
  if [[ ! -d /usr/share/maven-repo/org/apache/maven/plugins/$plugin ]]; then
    echo "maven_build: /usr/share/maven-repo lacks $plugin: install the Debian packages $packages (scripts/setup does)" >&2
    exit 1
  fi
done
version=$(tr -d '[:space:]' < "$here/../../VERSION")
rm -rf "$out"
mkdir -p "$out"
cd "$here"
mvn -o -B -s maven-settings.xml -Dmaven.repo.local="$out/m2" -Dflurry.target="$out/target" package
jar="$out/target/flurry-client-$version.jar"
if [[ ! -f "$jar" ]]; then
  echo "maven_build: no $jar: the jar is not named for VERSION $version" >&2
  exit 1
fi
classes=$(jar tf "$jar")
for class in FlurryClient Forms ReadableForm OpaqueKey KeyRing IdForm Key Wire Layout; do
  if ! grep -qx "dev/flurry/client/$class.class" <<<"$classes"; then
    echo "maven_build: $jar lacks dev/flurry/client/$class.class" >&2
    exit 1
  fi
done
mkdir -p "$out/manifest"
(cd "$out/manifest" && jar xf "$jar" META-INF/MANIFEST.MF)
manifest=$(cat "$out/manifest/META-INF/MANIFEST.MF")
if ! grep -q "^Implementation-Version: $version" <<<"${manifest//$'\r'/}"; then
  echo "maven_build: $jar's manifest has no Implementation-Version: $version" >&2
  exit 1
fi
echo "maven_build: $jar ($(wc -c < "$jar") bytes), version $version"
