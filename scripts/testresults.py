#!/usr/bin/env python3
"""scripts/testresults.py — what one `meson test` run of a suite left behind, test by test.

Read by scripts/test (the run's summary line) and scripts/flake-hunt (a table over many runs).
Counting: every GoogleTest case counts once (from the JUnit XML meson asks for with
protocol: 'gtest'); other tests count once each; a binary that failed outside its cases (crash,
timeout, sanitizer report at exit) adds a failure. A GoogleTest binary declared without
protocol: 'gtest' is a failure (its cases and skips would not be counted).

  testresults.py summary BUILD RUNS_FILE PROBLEMS_FILE FUZZ PROMISED CI CHAOS
      scripts/test's closing summary (see there); prints "N passed, N failed, N skipped".
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as et
from dataclasses import dataclass, field

_introspected: dict[str, dict] = {}


def tests_of(build_dir: str) -> dict:
    """{test name: meson's description of it} (its own env, protocol, workdir)."""
    if build_dir not in _introspected:
        found = {}
        try:
            listed = json.loads(subprocess.run(["meson", "introspect", build_dir, "--tests"],
                                               capture_output=True, text=True, check=True).stdout)
            found = {t["name"]: t for t in listed}
        except (subprocess.CalledProcessError, json.JSONDecodeError) as e:
            print(f"testresults: cannot list the tests of {build_dir}: {e}", file=sys.stderr)
        _introspected[build_dir] = found
    return _introspected[build_dir]


def skip_allowed(build_dir: str, name: str) -> str:
    """The reason when the test's own env sets FLURRY_SKIP_ALLOWED, else ''."""
    test = tests_of(build_dir).get(name) or {}
    return (test.get("env") or {}).get("FLURRY_SKIP_ALLOWED", "").strip()


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def gtest_cases(build_dir: str, name: str, since: float):
    """[(case name, 'pass'|'fail'|'skip', failure message)] from the test's JUnit XML, or None."""
    test = tests_of(build_dir).get(name) or {}
    if test.get("protocol") != "gtest":
        return None
    path = f"{name}.xml"  # where meson's --gtest_output puts it (mtest.py)
    if test.get("workdir"):
        path = os.path.join(test["workdir"], path)
    if not os.path.isabs(path):
        path = os.path.join(build_dir, path)
    # gtest writes the file when every case is done: a stale one is from an earlier run.
    if not os.path.exists(path) or os.path.getmtime(path) < since:
        return None
    try:
        root = et.parse(path).getroot()
    except et.ParseError:
        return None
    cases = []
    for case in root.iter("testcase"):
        case_name = f"{case.get('classname')}.{case.get('name')}"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            cases.append((case_name, "fail", _one_line(failure.get("message") or failure.text or "")))
        elif case.get("result") in ("skipped", "suppressed") or case.get("status") == "notrun" \
                or case.find("skipped") is not None:
            cases.append((case_name, "skip", ""))  # GTEST_SKIP, or DISABLED_: promised, not run
        else:
            cases.append((case_name, "pass", ""))
    return cases


def _failure_text(entry: dict) -> str:
    """The most telling line of a failed non-GoogleTest run's output."""
    output = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
    lines = [line for line in output.splitlines() if line.strip()]
    for marker in ("FAILED", "Error", "error", "AssertionError", "--- FAIL", "FAIL", "assert"):
        for line in lines:
            if marker in line:
                return _one_line(line)
    return _one_line(lines[-1]) if lines else f"exit status {entry.get('returncode')}"


@dataclass
class Outcome:
    test: str     # "project:suite / name", or that plus " :: Case.Name" for a GoogleTest case
    outcome: str  # pass, fail, skip
    message: str = ""


@dataclass
class SuiteRun:
    counts: dict = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    outcomes: list = field(default_factory=list)  # [Outcome]
    failures: list = field(default_factory=list)  # [str] for the summary
    skips: list = field(default_factory=list)     # [(meson test name, case or "(exit 77)")]
    tests: int = 0                                # meson tests the log holds


def read_suite_run(build_dir: str, logbase: str, since: float) -> SuiteRun:
    """What `meson test --logbase LOGBASE` in BUILD_DIR left, for a run started at `since`."""
    run = SuiteRun()
    path = os.path.join(build_dir, "meson-logs", f"{logbase}.json")
    if not os.path.exists(path):
        return run
    for text in open(path):
        text = text.strip()
        if not text:
            continue
        entry = json.loads(text)
        run.tests += 1
        name, result = entry.get("name", "?"), entry.get("result", "")
        short_name = name.split(" / ", 1)[-1]  # "project:suite / name"
        bad = result not in ("OK", "EXPECTEDFAIL", "SKIP")
        cases = gtest_cases(build_dir, short_name, since)
        protocol = (tests_of(build_dir).get(short_name) or {}).get("protocol")
        if protocol != "gtest" and "[==========] Running" in (entry.get("stdout") or ""):
            run.counts["fail"] += 1
            run.failures.append(f"{name}: a GoogleTest binary without protocol: 'gtest' in its "
                                "meson.build (its skips and cases are not counted)")
            run.outcomes.append(Outcome(name, "fail", "GoogleTest binary without protocol: 'gtest'"))
        for case, outcome, message in cases or []:
            run.counts[outcome] += 1
            run.outcomes.append(Outcome(f"{name} :: {case}", outcome, message))
            if outcome == "fail":
                run.failures.append(f"{name}: {case}")
            elif outcome == "skip":
                run.skips.append((name, case))
        case_failed = any(outcome == "fail" for _, outcome, _ in cases or [])
        case_skipped = any(outcome == "skip" for _, outcome, _ in cases or [])
        if bad and not case_failed:
            # Crash, timeout, sanitizer report at exit, or a test that is not GoogleTest.
            run.counts["fail"] += 1
            run.failures.append(f"{name}: {result} (exit status {entry.get('returncode')})")
            run.outcomes.append(Outcome(name, "fail", f"{result}: {_failure_text(entry)}"))
        elif result == "SKIP" and not case_skipped:
            run.counts["skip"] += 1
            run.skips.append((name, "(exit 77)"))
            run.outcomes.append(Outcome(name, "skip"))
        elif result in ("OK", "EXPECTEDFAIL") and cases is None:
            run.counts["pass"] += 1
            run.outcomes.append(Outcome(name, "pass"))
    return run


def summary(build, runs_file, problems_file, fuzz, promised, ci, chaos) -> int:
    """scripts/test's closing count: every suite run of RUNS_FILE, every build problem, fuzz
    and chaos. Fails a promised suite that skipped or ran nothing, and under CI any skip a
    test() does not allow with FLURRY_SKIP_ALLOWED."""
    promised = promised.split()
    under_ci = ci.lower() in ("true", "1", "yes")
    passed = failed = skipped = 0
    failures, bad_skips = [], []
    # A suite run in shards (scripts/test run_suite_beside) has one line per shard, each with
    # its own log base; they are counted, and printed, as one run of the suite.
    by_label: dict = {}
    for line in open(runs_file):
        fields = line.rstrip("\n").split("\t")
        label, build_dir, suite, since = fields[:4]
        logbase = fields[4] if len(fields) > 4 else f"testlog-{suite}"
        since = float(since) - 1  # file times have coarser clocks than date +%s.%N
        part = read_suite_run(build_dir, logbase, since)
        expected = int(fields[5]) if len(fields) > 5 else 0
        if part.tests < expected:
            # A shard whose meson test did not run all its tests (or left no log) must not
            # disappear inside the other shards' counts.
            part.counts["fail"] += 1
            part.failures.append(f"{logbase}: ran {part.tests} of its {expected} tests")
        if label not in by_label:
            by_label[label] = (build_dir, suite, SuiteRun())
        run = by_label[label][2]
        for outcome, n in part.counts.items():
            run.counts[outcome] += n
        run.outcomes += part.outcomes
        run.failures += part.failures
        run.skips += part.skips
    for label, (build_dir, suite, run) in by_label.items():
        counts = run.counts
        print(f"test: {label}: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped",
              file=sys.stderr)
        passed += counts["pass"]
        failed += counts["fail"]
        skipped += counts["skip"]
        failures += [f"{label}: {f}" for f in run.failures]
        if suite in promised and counts["pass"] + counts["fail"] + counts["skip"] == 0:
            bad_skips.append(f"{label}: the promised suite '{suite}' ran no test")
        for name, case in run.skips:
            reason = skip_allowed(build_dir, name.split(" / ", 1)[-1])
            if suite in promised:
                bad_skips.append(f"{label}: {name}: {case} skipped in a promised suite")
            elif under_ci and not reason:
                bad_skips.append(f"{label}: {name}: {case} skipped under CI (set FLURRY_SKIP_ALLOWED "
                                 "in its test() env with the reason if that is intended)")
            else:
                why = f" (allowed: {reason})" if reason else ""
                print(f"test: {label}: {name}: {case} skipped{why}", file=sys.stderr)
    for line in open(problems_file):
        label, what = line.rstrip("\n").split("\t", 1)
        failed += 1
        failures.append(f"{label}: {what}")
    for name, result, what in (("fuzz", fuzz, "scripts/fuzz found a crash or a broken invariant"),
                               ("chaos", chaos, "scripts/chaos found a duplicate or a failed check "
                                                "(its log above)")):
        if result == "pass":
            passed += 1
        elif result == "fail":
            failed += 1
            failures.append(f"{name}: {what}")
    for f in failures:
        print(f"test: FAILED {f}", file=sys.stderr)
    for s in bad_skips:
        print(f"test: FAILED {s}", file=sys.stderr)
    failed += len(bad_skips)
    line = f"{passed} passed, {failed} failed, {skipped} skipped"
    open(os.path.join(build, "test-summary.txt"), "w").write(line + "\n")
    print(line)
    return 1 if failed else 0


def shard_lists(count: int, names: list, logs) -> list:
    """The tests NAMES (short names) cut into COUNT lists of about equal time, longest first onto
    the list with the least time so far, from the durations earlier runs left in LOGS (meson's
    testlog .json files; a test none of them ran counts as their median). Empty lists are left
    out."""
    count = max(1, int(count))
    durations = {}
    for log in logs:
        if not os.path.exists(log):
            continue
        for text in open(log):
            text = text.strip()
            if text:
                entry = json.loads(text)
                durations[entry.get("name", "?").split(" / ", 1)[-1]] = float(entry.get("duration") or 0)
    known = sorted(durations[n] for n in names if n in durations)
    median = known[len(known) // 2] if known else 1.0
    loads = [[0.0, []] for _ in range(count)]
    for name in sorted(names, key=lambda n: (-durations.get(n, median), n)):
        shard = min(loads, key=lambda s: s[0])
        shard[0] += durations.get(name, median)
        shard[1].append(name)
    return [members for _, members in loads if members]


def shards(count: str, names_file: str, *logs: str) -> int:
    """Splits the tests named in NAMES_FILE (one per line, as `meson test --list` prints them)
    into COUNT shards (shard_lists). Prints one line per non-empty shard: the tests' short
    names, separated by spaces."""
    names = [n.strip().split(" / ", 1)[-1] for n in open(names_file) if n.strip()]
    for members in shard_lists(int(count), names, logs):
        print(" ".join(members))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "summary":
        sys.exit(summary(*sys.argv[2:9]))
    if len(sys.argv) >= 4 and sys.argv[1] == "shards":
        sys.exit(shards(*sys.argv[2:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
