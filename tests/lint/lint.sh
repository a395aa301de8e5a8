#!/usr/bin/env bash
# tests/lint/lint.sh SOURCE_ROOT — what review would otherwise nag about (CONTRIBUTING.md):
#   1. base/, proto/ and core/ include only the standard library and each other (the build links
#      them with nothing else; this catches a header-only slip too); base/log.* (fmt, json) and
#      base/cli.cc (CLI11) aside;
#   2. DPDK headers (rte_*) only under dataplane/dpdk/ (and perf/dpdk_*, the DPDK load generator:
#      a client of the appliance, outside the product's layers);
#   3. liburing, curl and etcd only where they belong (persist/, control/cluster/); CLI11 only in
#      base/cli.cc (the programs parse flags through base/cli.h: CLI11 is about 10 s of g++ in
#      every file that includes it);
#   4. no allocation in hot-path files (the handler, the generator, the workers' loops);
#   5. every shell script is bash with `set -u` at least (a Python one must parse);
#   6. no hand-kept list of GoogleTest cases in tests/ (a --gtest_filter in a meson.build):
#      each binary runs whole with protocol: 'gtest', so a new test cannot be left out;
#   7. the include arrows between our folders (docs/architecture.md), and one logger;
#   8. every C++ file formatted as .clang-format says (clang-format 14, from scripts/setup).
# Prints every violation with file:line and exits 1 if there is any.
set -uo pipefail
root=${1:?usage: lint.sh SOURCE_ROOT}
cd "$root"
violations=0
report() { echo "lint: $*"; violations=$((violations + 1)); }
# Not searched: build trees (gigabytes of objects), git's store, language tool caches.
skip_dirs=(--exclude-dir='build*' --exclude-dir=.git --exclude-dir=node_modules --exclude-dir=target)

# 1. base/, proto/ and core/: standard headers (<...> without rte_/liburing/curl/...) or ours.
while IFS= read -r line; do
  file=${line%%:*}; rest=${line#*:}; number=${rest%%:*}; include=${rest#*:}
  case "$include" in
    *'"base/'*|*'"proto/'*|*'"core/'*) ;;
    *'<'*'>'*)
      header=$(sed -E 's/.*<([^>]+)>.*/\1/' <<<"$include")
      [[ "$header" == */* || "$header" == *.h && "$header" != *.hpp ]] && report "$file:$number: $header is not a standard header (base/, proto/ and core/ depend on nothing else)"
      ;;
    *) report "$file:$number: $include (base/, proto/ and core/ include only the standard library and each other)" ;;
  esac
done < <(grep -nE '^\s*#\s*include' base/*.h base/*.cc proto/*.h proto/*.cc core/*.h core/*.cc | grep -vE '^base/(log\.(h|cc)|cli\.cc):')

# 2. DPDK only in dataplane/dpdk/ (and the DPDK load generator, perf/dpdk_*).
while IFS= read -r hit; do report "$hit: DPDK header outside dataplane/dpdk/"; done < <(
  grep -rnE '#\s*include\s*[<"](rte_|generic/rte_)' --include='*.h' --include='*.cc' "${skip_dirs[@]}" . |
    grep -vE '^\./(dataplane/dpdk/|perf/dpdk_|build)' || true)

# 3. liburing in persist/ only (and its tests: the fake ring); curl in control/cluster/ only (tests may use curl as a client).
while IFS= read -r hit; do report "$hit: liburing outside persist/"; done < <(
  grep -rnE '#\s*include\s*<liburing' --include='*.h' --include='*.cc' "${skip_dirs[@]}" . | grep -vE '^\./(persist/|tests/persist/|build|perf/persist)' || true)
while IFS= read -r hit; do report "$hit: libcurl outside control/cluster/"; done < <(
  grep -rnE '#\s*include\s*<curl/' --include='*.h' --include='*.cc' "${skip_dirs[@]}" . | grep -vE '^\./(control/cluster/|tests/|build)' || true)

while IFS= read -r hit; do report "$hit: CLI11 outside base/cli.cc (parse flags through base/cli.h)"; done < <(
  grep -rnE '#\s*include\s*[<"]CLI/' --include='*.h' --include='*.cc' "${skip_dirs[@]}" . | grep -vE '^\./base/cli\.cc:' || true)

# 4. Hot-path files: no heap allocation.
hot=(core/generator.h core/handler.cc core/slice.cc base/counter.h core/ceiling.h core/replay_filter.cc core/sequence_table.cc core/source_limit.h)
[[ -f dataplane/frame.cc ]] && hot+=(dataplane/frame.cc)
[[ -f dataplane/dpdk/worker.cc ]] && hot+=(dataplane/dpdk/worker.cc)
while IFS= read -r hit; do report "$hit: allocation in a hot-path file"; done < <(
  grep -nE '\bnew\b|\bmalloc\s*\(|\bcalloc\s*\(|make_unique|make_shared|push_back|emplace_back|\.resize\(|std::string\b|std::vector\b|std::map\b|std::function\b' \
    "${hot[@]}" | grep -vE '^\S+:[0-9]+:\s*//' || true)

# 5. Shell scripts (Python ones — scripts/chaos — must at least compile).
for script in scripts/* .ci/run perf/*_compare tests/perf/*.py tests/lint/lint.sh; do
  [[ -f "$script" ]] || continue
  if [[ "$script" == *.py ]] || head -1 "$script" | grep -q 'python3'; then
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$script" 2>/dev/null ||
      report "$script: does not parse as Python"
    continue
  fi
  # A library that scripts source (scripts/common.sh) runs under its caller's options.
  head -1 "$script" | grep -q '^# .* bash library, sourced' && continue
  head -1 "$script" | grep -q 'bash' || { report "$script: not a bash script"; continue; }
  grep -qE '^set -[a-z]*u' "$script" || report "$script: no 'set -u'"
done

# 6. Tests are discovered by running the whole binary, not listed by hand.
while IFS= read -r hit; do report "$hit: --gtest_filter in a meson.build (run the whole binary with protocol: 'gtest'; tests/meson.build)"; done < <(
  grep -rn --include=meson.build -e '--gtest_filter' tests/ | grep -vE '^\S+:[0-9]+:\s*#' || true)

# 7. The arrows (docs/architecture.md): which of our folders each folder may include.
#    base <- proto <- core <- dataplane; proto <- client; base <- persist; core <- control;
#    control/node/ (the node library) alone sees every part; flurryd's main (control/flurryd.cc)
#    and the tests are the only files outside it that include it.
check_arrows() {
  local folder=$1 allowed=$2 except=${3:-}
  [[ -d "$folder" ]] || return 0
  while IFS= read -r hit; do
    local target=${hit#*#include \"}; target=${target%%/*}
    [[ " $allowed " == *" $target "* ]] || report "$hit: $folder/ may include only $allowed (docs/architecture.md)"
  done < <(grep -rnE '^\s*#\s*include\s*"[a-z_]+/' "$folder" --include='*.h' --include='*.cc' |
             { if [[ -n "$except" ]]; then grep -vE "^$except/"; else cat; fi; } || true)
}
check_arrows base "base"
check_arrows proto "proto base"
check_arrows core "core proto base"
check_arrows persist "persist base"
check_arrows client "client proto base"
check_arrows dataplane "dataplane core proto base"
check_arrows control "control core proto base" control/node
check_arrows control/node "control dataplane persist core proto base"
while IFS= read -r hit; do report "$hit: only control/flurryd.cc (and tests/) may include the node library"; done < <(
  grep -rnE '^\s*#\s*include\s*"control/node/' --include='*.h' --include='*.cc' "${skip_dirs[@]}" . |
    grep -vE '^\./(control/node/|control/flurryd\.cc:|tests/)' || true)

# 7b. One logger: no log line of the daemon is written around base/log.h (it would ignore
#     --log-format json). The command-line tools (flurryctl, flurry) print to their user.
while IFS= read -r hit; do report "$hit: log through base/log.h (log_info/log_warn/log_error), not stderr"; done < <(
  grep -rnE 'fprintf\(stderr|std::cerr|fputs\([^;]*stderr' proto core persist dataplane control client \
    --include='*.h' --include='*.cc' 2>/dev/null |
    grep -vE '^(control/flurryctl\.cc|client/flurry_cli\.cc):' | grep -vE '^\S+:[0-9]+:\s*//' || true)

# 8. Format: clang-format --dry-run over every C++ file git tracks (every one below the root
#    when this is not a git checkout). `clang-format -i FILE` fixes a report.
if command -v clang-format >/dev/null; then
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t cpp_files < <(git ls-files '*.cc' '*.h')
  else
    mapfile -t cpp_files < <(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print | sed 's|^\./||')
  fi
  # clang-format on 24 files a process, on every CPU (a process a file cost 10 times as much);
  # --dry-run names each file it would change in its warnings (FILE:LINE:COL: error: ...).
  while IFS= read -r file; do
    report "$file: not clang-formatted (clang-format -i $file)"
  done < <(for file in "${cpp_files[@]}"; do [[ -f "$file" ]] && printf '%s\0' "$file"; done |
             xargs -0 -r -n 24 -P "$(nproc)" clang-format --dry-run --Werror 2>&1 |
             grep -oE '^[^: ]+:[0-9]+:[0-9]+: (error|warning)' | cut -d: -f1 | sort -u)
else
  report "clang-format not found: apt-get install -y clang-format (scripts/setup installs it)"
fi

if ((violations)); then
  echo "lint: $violations violation(s)"
  exit 1
fi
echo "lint: clean"
