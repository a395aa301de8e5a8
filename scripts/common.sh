# scripts/common.sh — a bash library, sourced by scripts/run, scripts/test and scripts/package.
#
# build_with_progress LABEL DIR LOG [TARGET...]
#   Builds DIR with ninja (all targets, or TARGET...), ninja's output in LOG, and prints a
#   progress line to stderr every FLURRY_PROGRESS_S seconds (default 15): the step, the steps
#   done of all, the time so far and an estimate of the time left (from the pace so far). On
#   failure it prints the last 40 lines of LOG. Returns ninja's status. Jobs: FLURRY_BUILD_JOBS
#   (default: the CPUs this process may use).
#
# The figures of a first build on this project's reference machine (2 vCPUs, no ccache) are in
# README.md "The two commands"; first_run_note prints them.

build_with_progress() {
  local label=$1 dir=$2 log=$3
  shift 3
  local jobs=${FLURRY_BUILD_JOBS:-$(nproc)} every=${FLURRY_PROGRESS_S:-15}
  local start=$SECONDS
  NINJA_STATUS='[%f/%t] ' ninja -C "$dir" -j "$jobs" "$@" >"$log" 2>&1 &
  local ninja_pid=$! last_print=$SECONDS status
  while kill -0 "$ninja_pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last_print >= every)); then
      last_print=$SECONDS
      # The last "[done/total] Compiling ..." line ninja wrote.
      local line done total elapsed=$((SECONDS - start)) left=""
      line=$(grep -a -o '^\[[0-9]*/[0-9]*\] .*' "$log" 2>/dev/null | tail -1 || true)
      if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
        done=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
        if ((done > 0 && total > done)); then
          left=", about $(( (elapsed * (total - done) / done + 30) / 60 )) min left"
        fi
        printf '%s: building %s: %s of %s steps, %d s so far%s (%s)\n' "${0##*/}" "$label" "$done" "$total" \
          "$elapsed" "$left" "$(echo "${BASH_REMATCH[3]}" | cut -c1-70)" >&2
      else
        printf '%s: building %s: %d s so far\n' "${0##*/}" "$label" "$elapsed" >&2
      fi
    fi
  done
  status=0
  wait "$ninja_pid" || status=$?
  if ((status != 0)); then
    tail -40 "$log" >&2
    printf '%s: building %s failed (log: %s)\n' "${0##*/}" "$label" "$log" >&2
  elif ! grep -q 'ninja: no work to do' "$log" 2>/dev/null; then
    printf '%s: built %s in %d s\n' "${0##*/}" "$label" "$((SECONDS - start))" >&2
  fi
  return "$status"
}

# first_run_note DIR WHAT: says what a first build costs when DIR has not been built yet.
first_run_note() {
  local dir=$1 what=$2
  [[ -f "$dir/.ninja_log" ]] && return 0
  printf '%s: first build of %s: about %s on 2 CPUs without ccache (later runs rebuild only what changed)\n' \
    "${0##*/}" "$dir" "$what" >&2
}
