#!/usr/bin/env python3
"""tests/docs/snippets_test.py — every quick start in the docs, run as pasted.

A fenced block right after a line `<!-- snippet: NAME -->` in README.md or docs/*.md is a
quick start; `<!-- snippet: NAME file=PATH -->` marks a block to be saved as PATH (relative to
the checkout) for a later snippet to build or run. Blocks marked without file= must be `sh`:
each runs with bash (-e -o pipefail) from the root of a copy of the checkout, in the order of
the documents (README.md first, then docs/*.md by name), and must exit 0.

The copy: the build's tools (build/client/flurry, build/control/flurryctl, the C++ library)
copied into ROOT/build exactly where `scripts/run` leaves them, client/ copied (builds write
next to it), the other source folders linked, and
a real flurryd started the way `scripts/run` starts it (state in ROOT/build/run-state, UDP
127.0.0.1:7420, RESP 127.0.0.1:6380, HTTP 127.0.0.1:8080, memcached 127.0.0.1:11212) inside a network namespace of its
own, so the snippets' fixed addresses are free whatever else runs on the host. The snippets
run in that namespace too. Nothing is substituted in them: a snippet that stops working as
written fails here, naming its file, line and output.

Every ID a snippet prints (a decimal number of 10 or more digits on a line of its own) is
collected, and no ID may appear twice over the whole run.

The quick starts keep the clients' defaults (5 attempts of 100 ms), and a fresh JVM or Go
binary on a loaded 2-CPU machine can miss all five: the client then says "no answer from ..."
(Java: NO_ANSWER), as its contract says, which says the machine was slow, not that the quick
start is wrong. Such a run is run again, at most RUNS times in all (the IDs it printed still
count), after what the failed run created in the copy is removed (a snippet such as Go's
`go mod init` is not meant to run twice in one place; the caches under HOME and flurryd's state
stay); any other
failure fails at once.

Environment: SOURCE_ROOT, BUILD_ROOT (meson), FLURRYD. Needs root (the namespace).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE = os.environ["SOURCE_ROOT"]
BUILD = os.environ["BUILD_ROOT"]
FLURRYD = os.environ["FLURRYD"]
MARK = re.compile(r"^<!--\s*snippet:\s*([A-Za-z0-9_.-]+)(?:\s+file=(\S+))?\s*-->\s*$")
FENCE = re.compile(r"^(```+)\s*([A-Za-z0-9_+-]*)")
ID_LINE = re.compile(r"^\s*(\d{10,20})\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Maven colours its output even into a pipe
SNIPPET_TIMEOUT_S = 600  # a first Maven or Go build in a cold cache is slow on 2 CPUs
RUNS = 3
NO_ANSWER = re.compile(r"no answer from|NO_ANSWER")  # every client's words for it


def paths_under(root, skip):
    """Every path below ROOT, not below the directories in SKIP, without following links."""
    found = set()
    for directory, subdirectories, files in os.walk(root):
        if any(directory == kept or directory.startswith(kept + os.sep) for kept in skip):
            subdirectories[:] = []
            continue
        found.update(os.path.join(directory, name) for name in subdirectories + files)
    return found


def remove_new(root, skip, before):
    """Removes what appeared below ROOT (outside SKIP) since BEFORE (paths_under): a snippet's
    failed run, so that it can run again as in a fresh copy."""
    new = paths_under(root, skip) - before
    for path in sorted(new, key=len):
        if os.path.dirname(path) in new or not os.path.lexists(path):
            continue  # inside a new directory: removed with it
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def fail(message):
    print(f"snippets_test: {message}", file=sys.stderr)
    sys.exit(1)


def documents():
    docs = [os.path.join(SOURCE, "README.md")]
    docs_dir = os.path.join(SOURCE, "docs")
    if os.path.isdir(docs_dir):
        docs += sorted(os.path.join(docs_dir, n) for n in os.listdir(docs_dir) if n.endswith(".md"))
    return docs


def snippets():
    """(document, line, name, file or None, language, text) for every marked block."""
    found = []
    for doc in documents():
        with open(doc, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        i = 0
        while i < len(lines):
            mark = MARK.match(lines[i])
            if not mark:
                i += 1
                continue
            fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
            rel = os.path.relpath(doc, SOURCE)
            if not fence:
                fail(f"{rel}:{i + 1}: snippet '{mark.group(1)}' is not followed by a fenced block")
            end = i + 2
            while end < len(lines) and not lines[end].startswith(fence.group(1)):
                end += 1
            if end == len(lines):
                fail(f"{rel}:{i + 2}: the fenced block of snippet '{mark.group(1)}' is not closed")
            text = "\n".join(lines[i + 2:end]) + "\n"
            found.append((rel, i + 1, mark.group(1), mark.group(2), fence.group(2), text))
            i = end + 1
    return found


def make_root(root):
    """A checkout as a user has it after `scripts/run`: sources linked, tools copied."""
    for name in os.listdir(SOURCE):
        if name in ("build", ".git") or name.startswith("build-"):
            continue
        if name == "client":  # copied: Maven, pip and Go write next to the sources they build
            shutil.copytree(os.path.join(SOURCE, name), os.path.join(root, name), symlinks=True,
                            ignore=shutil.ignore_patterns("target", "node_modules", "__pycache__", "*.egg-info"))
            continue
        os.symlink(os.path.join(SOURCE, name), os.path.join(root, name))
    for rel in ("client/flurry", "control/flurryctl", "control/flurryd"):
        os.makedirs(os.path.join(root, "build", os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(os.path.join(BUILD, rel), os.path.join(root, "build", rel))
    client_dir = os.path.join(BUILD, "client")
    for name in os.listdir(client_dir):
        if name.startswith("libflurry"):
            source = os.path.join(client_dir, name)
            target = os.path.join(root, "build", "client", name)
            if os.path.islink(source):
                os.symlink(os.readlink(source), target)
            elif os.path.isfile(source):
                shutil.copy2(source, target)


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def wait_for_udp(namespace, port, seconds):
    """PING the server from inside the namespace until it answers (the flurry CLI's ping)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        probe = subprocess.run(["ip", "netns", "exec", namespace, os.path.join(BUILD, "client", "flurry"),
                                "ping", "--server", f"127.0.0.1:{port}", "-c", "1", "--timeout-ms", "200"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return True
        time.sleep(0.2)
    return False


def main():
    # meson's timeout (and Ctrl-C) end the test with SIGTERM: clean up (the finally below)
    # the namespace, flurryd and the temporary checkout all the same.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("snippets_test: terminated"))
    if os.geteuid() != 0:
        fail("needs root for its network namespace (scripts/test runs it as root)")
    found = snippets()
    names = {name for _, _, name, _, _, _ in found}
    expected = set(os.environ.get("FLURRY_SNIPPETS_EXPECTED", "").split())
    missing = sorted(expected - names)
    if missing:
        fail(f"quick starts missing from the docs: {', '.join(missing)} (each needs a <!-- snippet: NAME --> block)")
    if not found:
        fail("no <!-- snippet: NAME --> block found in README.md or docs/")
    for rel, line, name, file, language, _ in found:
        if file is None and language != "sh":
            fail(f"{rel}:{line}: snippet '{name}' is `{language or 'plain'}`: run blocks must be sh "
                 "(mark others with file=PATH)")

    namespace = f"flurry-snippets-{os.getpid()}"
    root = tempfile.mkdtemp(prefix="flurry-snippets-")
    daemon = None
    log_path = os.path.join(root, "flurryd.log")
    seen = {}
    failures = []
    try:
        make_root(root)
        run(["ip", "netns", "add", namespace])
        run(["ip", "-n", namespace, "link", "set", "lo", "up"])
        state = os.path.join(root, "build", "run-state")
        with open(log_path, "w") as log:
            # Its own /run/flurry too (a tmpfs in a mount namespace): flurryd's host-wide locks
            # (node 0, 127.0.0.1:7420) must not meet a scripts/run server of the same host.
            daemon = subprocess.Popen(
                ["ip", "netns", "exec", namespace, "unshare", "--mount", "--propagation", "private", "sh", "-c",
                 'mkdir -p /run/flurry && mount -t tmpfs -o mode=0700 flurry-locks /run/flurry && exec "$@"',
                 "sh", os.path.join(root, "build", "control", "flurryd"),
                 "--state-dir", state, "--init", "--resp-listen", "127.0.0.1:6380",
                 "--http-listen", "127.0.0.1:8080", "--memcache-listen", "127.0.0.1:11212"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_for_udp(namespace, 7420, 30):
            with open(log_path) as log:
                fail(f"flurryd did not answer on 127.0.0.1:7420 in its namespace:\n{log.read()}")
        env = dict(os.environ)
        for name in ("FLURRY_STATE_DIR", "FLURRY_CONTROL_SOCKET", "PYTHONPATH"):
            env.pop(name, None)
        env["HOME"] = os.path.join(root, "home")
        os.makedirs(env["HOME"])
        # Go's and Maven's caches (under HOME) stay inside the temporary root. GOPROXY=off:
        # a quick start that needs a download fails here at once instead of waiting on the
        # network (a user's default proxy is never asked for the replaced module either).
        env["GOPROXY"] = "off"
        for name in ("GOFLAGS", "GOPATH", "GOCACHE", "GOMODCACHE"):
            env.pop(name, None)
        for rel, line, name, file, language, text in found:
            where = f"{rel}:{line} ({name})"
            if file is not None:
                path = os.path.join(root, file)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as out:
                    out.write(text)
                print(f"snippets_test: {where}: saved as {file}")
                continue
            # What a failed run created is removed before the next, but for the caches under HOME
            # and the running flurryd's state.
            kept = (env["HOME"], state)
            before = paths_under(root, kept)
            for attempt in range(1, RUNS + 1):
                started = time.monotonic()
                result = subprocess.run(["ip", "netns", "exec", namespace, "bash", "-e", "-o", "pipefail", "-c",
                                         text], cwd=root, env=env, capture_output=True, text=True,
                                        timeout=SNIPPET_TIMEOUT_S)
                took = time.monotonic() - started
                print(f"snippets_test: {where}: exit {result.returncode} in {took:.1f} s")
                print("  | " + result.stdout.rstrip().replace("\n", "\n  | "))
                lines = ANSI.sub("", result.stdout).split("\n")
                ids = [int(m.group(1)) for m in map(ID_LINE.match, lines) if m]
                for value in ids:
                    if value in seen:
                        failures.append(f"{where}: ID {value} printed twice (first by {seen[value]})")
                    seen[value] = where
                if result.returncode == 0:
                    break
                if attempt < RUNS and NO_ANSWER.search(result.stdout + result.stderr):
                    print(f"snippets_test: {where}: the client got no answer (a slow machine): run again\n  | "
                          + result.stderr.rstrip().replace("\n", "\n  | "))
                    remove_new(root, kept, before)
                    continue
                failures.append(f"{where} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
                break
        if daemon.poll() is not None:
            failures.append(f"flurryd exited ({daemon.returncode}) during the snippets")
    finally:
        if daemon is not None and daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    print(f"snippets_test: {len(found)} snippets, {len(seen)} IDs printed, none twice" if not failures else "")
    if failures:
        fail("\n\n".join(failures))


if __name__ == "__main__":
    main()
