#!/usr/bin/env bash
# tests/package/package_test.sh — the Debian package end to end (suite 'package'; it installs
# into /usr, so: flock /tmp/flurry-integration.lock meson test -C build --suite package).
# Builds it with scripts/package (lintian included), installs it with dpkg -i, checks the files
# are where the README says, compiles a C program against the installed headers, library and
# pkg-config file, starts the packaged flurryd as a new node (--init) on loopback with a temp
# state dir, fetches IDs with the packaged `flurry` (and the C program), restarts it from its
# watermark, checks every ID is unique, then purges the package and checks it is gone.
# Node id 1021, udp 127.0.0.1:7493 and tcp 127.0.0.1:9493 (metrics) are used by no other test. Exits 77 (skip) when not root;
# scripts/test fails a run in which this promised suite skipped.
set -euo pipefail
source_root=${SOURCE_ROOT:?SOURCE_ROOT: the source tree}
build_root=${BUILD_ROOT:?BUILD_ROOT: the meson build tree}
listen=127.0.0.1:7493
metrics=127.0.0.1:9493
node_id=1021
if [[ $(id -u) -ne 0 ]]; then
  echo "package_test: needs root (dpkg -i into /usr); skipped" >&2
  exit 77
fi

work=$(mktemp -d /tmp/flurry-package-test.XXXXXX)
flurryd_pid=""
cleanup() {
  set +e  # every step runs, whatever failed before
  [[ -n "$flurryd_pid" ]] && kill -KILL "$flurryd_pid" 2>/dev/null
  dpkg-query -W -f='${Status}' flurry 2>/dev/null | grep -q installed && dpkg_waiting --purge flurry
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
fail() { echo "package_test: FAILED: $*" >&2; exit 1; }
# dpkg ARGS...: waits (up to 60 s) while another dpkg or apt holds dpkg's lock, output in dpkg.log.
dpkg_waiting() {
  for _ in $(seq 30); do
    dpkg "$@" >"$work/dpkg.log" 2>&1 && return 0
    grep -q 'lock' "$work/dpkg.log" || return 1
    sleep 2
  done
  return 1
}
step() { echo "package_test: $*" >&2; }

if dpkg-query -W -f='${Status}' flurry 2>/dev/null | grep -q 'ok installed'; then
  step "a flurry package is installed already (an earlier run stopped?): purging it first"
  dpkg_waiting --purge flurry || { cat "$work/dpkg.log" >&2; fail "dpkg --purge of the earlier install"; }
fi

step "building the package (scripts/package)"
deb=$("$source_root/scripts/package" --build-dir "$build_root" --out "$build_root" | tail -1)
[[ -f "$deb" ]] || fail "scripts/package printed no .deb ($deb)"
dpkg-deb --field "$deb" Depends | grep -q 'libc6' || fail "Depends lacks the shared libraries: $(dpkg-deb --field "$deb" Depends)"

step "installing $deb"
dpkg_waiting -i "$deb" || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for file in /usr/bin/flurryd /usr/bin/flurryctl /usr/bin/flurry /usr/bin/flurry-bench \
    "$libdir/libflurry_client.so.0" /usr/include/flurry/client/flurry_client.h \
    "$libdir/pkgconfig/flurry-client.pc" /lib/systemd/system/flurryd.service /etc/flurry/flurryd.toml \
    /usr/share/flurry/prometheus/flurry.rules.yml /usr/share/flurry/grafana/flurry-dashboard.json \
    /usr/share/doc/flurry/README.md /usr/share/doc/flurry/copyright; do
  dpkg -S "$file" >/dev/null 2>&1 || fail "$file is not in the installed package"
done
getent passwd flurry >/dev/null || fail "postinst did not create the user flurry"
systemd-analyze verify /lib/systemd/system/flurryd.service || fail "the installed unit does not verify"

step "compiling a C program against the installed library (pkg-config flurry-client)"
cat >"$work/get.c" <<'C'
#include <client/flurry_client.h>
#include <inttypes.h>
#include <stdio.h>
int main(int argc, char** argv) {
  char err[256];
  flurry_client* client = flurry_client_create(argc > 1 ? argv[1] : NULL, 2000, 0, err, sizeof err);
  if (client == NULL) { fprintf(stderr, "create: %s\n", err); return 1; }
  uint64_t ids[1000];
  int code = flurry_client_get(client, ids, 1000, err, sizeof err);
  if (code != 0) { fprintf(stderr, "get: %s: %s\n", flurry_strerror(code), err); return 1; }
  for (int i = 0; i < 1000; ++i) printf("%" PRIu64 "\n", ids[i]);
  flurry_client_destroy(client);
  return 0;
}
C
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror -o "$work/get" "$work/get.c" $(pkg-config --cflags --libs flurry-client) ||
  fail "a C program does not build against the installed headers and library"

start_flurryd() {
  # The packaged configuration, with this test's node, addresses and state dir (flags win).
  /usr/bin/flurryd --config /etc/flurry/flurryd.toml --state-dir "$work/state" --node-id "$node_id" \
    --listen "$listen" --metrics-listen "$metrics" --workers 1 "$@" \
    >>"$work/flurryd.log" 2>&1 &
  flurryd_pid=$!
  for _ in $(seq 300); do
    /usr/bin/flurry get -n 1 --server "$listen" --timeout-ms 100 >/dev/null 2>&1 && return 0
    kill -0 "$flurryd_pid" 2>/dev/null || { cat "$work/flurryd.log" >&2; fail "flurryd $* exited"; }
    sleep 0.1
  done
  cat "$work/flurryd.log" >&2
  fail "the packaged flurryd does not serve on $listen within 30 s"
}
stop_flurryd() {
  kill -TERM "$flurryd_pid"
  timeout 30 tail --pid="$flurryd_pid" -f /dev/null || fail "flurryd did not stop on SIGTERM within 30 s"
  wait "$flurryd_pid" || fail "flurryd exited non-zero on SIGTERM"
  flurryd_pid=""
}

step "first start of the packaged flurryd (--init, node $node_id, udp $listen)"
start_flurryd --init
for _ in 1 2 3 4 5; do /usr/bin/flurry get -n 1000 --server "$listen" --timeout-ms 2000 >>"$work/ids"; done
"$work/get" "$listen" >>"$work/ids" || fail "the C program got no IDs"
/usr/bin/flurryctl --control-socket "$work/state/flurryd.sock" status >/dev/null || fail "flurryctl status"
# Asked until ready (bounded: 30 s): a watermark write pending past stall_ms (a busy disk on a
# loaded machine) makes a serving node unready for that moment.
ready=""
for _ in $(seq 150); do
  if curl -fsS "http://$metrics/readyz" 2>/dev/null | grep -qx ok; then ready=yes; break; fi
  sleep 0.2
done
[[ -n "$ready" ]] || fail "the packaged flurryd is not ready on http://$metrics/readyz"
stop_flurryd
step "second start, from the watermark (no --init)"
start_flurryd
for _ in 1 2 3 4 5; do /usr/bin/flurry get -n 1000 --server "$listen" --timeout-ms 2000 >>"$work/ids"; done
stop_flurryd

count=$(wc -l <"$work/ids")
[[ $count -eq 11000 ]] || fail "expected 11000 IDs, got $count"
duplicates=$(sort "$work/ids" | uniq -d | wc -l)
[[ $duplicates -eq 0 ]] || fail "$duplicates duplicate IDs"
step "11000 IDs over two starts, no duplicate"

step "purging the package"
dpkg_waiting --purge flurry || { cat "$work/dpkg.log" >&2; fail "dpkg --purge"; }
if dpkg-query -W -f='${Status}' flurry 2>/dev/null | grep -q 'ok installed'; then fail "still installed"; fi
for file in /usr/bin/flurryd /usr/bin/flurry "$libdir/libflurry_client.so.0" /etc/flurry/flurryd.toml \
    /lib/systemd/system/flurryd.service; do
  [[ ! -e "$file" ]] || fail "$file is still there after dpkg --purge"
done
echo "package_test: ok"
