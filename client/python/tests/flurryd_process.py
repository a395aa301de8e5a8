"""Real flurryd processes for the integration test and the benchmark: each in its own fresh
temporary directory (state dir, control socket, log), on a free 127.0.0.1 UDP port, started
with --init. Every process is killed (SIGKILL, by PID) and reaped by stop(), which is safe to
call twice and is called on every path by the callers' finally blocks and fixtures.

A node id is one per host (flurryd refuses a second process with the same one), and other
test suites may run flurryds on this host at the same time: start_servers asks for node ids
1, 2, ... and moves to another free one, a bounded number of times, when flurryd says a node id
is already served here."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from flurry_client import Client, FlurryError, Key

# Ends only a wait for a flurryd that never serves: a sanitizer build on a loaded machine may
# take many seconds to start.
READY_TIMEOUT_S = 60.0
NODE_ID_TRIES = 16
NODE_ID_TAKEN = "is already served on this host"


class NodeIdTaken(RuntimeError):
    """Another flurryd on this host serves the node id asked for."""


def flurryd_path() -> str:
    path = os.environ.get("FLURRYD", "")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"FLURRYD={path!r} is not an executable flurryd; meson sets it "
                           "(build it with: ninja -C build control/flurryd)")
    return path


_HANDED_OUT: set[int] = set()  # every port free_udp_port gave: never twice


def free_udp_port() -> int:
    """A port the kernel just picked on 127.0.0.1 and this process never handed out before: a
    test starting two flurryds asks for both ports before either binds, and the kernel's random
    pick may repeat."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("1000 ports picked on 127.0.0.1, each one handed out before")


class Flurryd:
    def __init__(self, node_id: int, binary: str | None = None, flags: tuple[str, ...] = (),
                 key: Key | None = None):
        """`flags` are added to flurryd's command line; `key` signs the readiness check (for
        a flurryd with --auth required, which refuses unsigned GET_IDS)."""
        self.node_id = node_id
        self.key = key
        self.directory = tempfile.mkdtemp(prefix=f"flurry-py-node{node_id}-")
        self.address = f"127.0.0.1:{free_udp_port()}"
        self.log_path = os.path.join(self.directory, "flurryd.log")
        command = [binary or flurryd_path(), "--init",
                   "--state-dir", os.path.join(self.directory, "state"),
                   "--listen", self.address,
                   "--control-socket", os.path.join(self.directory, "ctl.sock"),
                   "--node-id", str(node_id), *flags]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        self.pid = self.process.pid

    def log_tail(self, lines: int = 15) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            return "".join(log.readlines()[-lines:])

    def wait_ready(self) -> None:
        """Until it answers PING and issues an ID (a new node answers RETRY until its first
        ceiling is durable); bounded by READY_TIMEOUT_S. Raises with the log tail."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        with Client(servers=[self.address], timeout_ms=100, attempts=1,
                    retry_budget_ms=1000, key=self.key) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    failure = NodeIdTaken if NODE_ID_TAKEN in self.log_tail() else RuntimeError
                    raise failure(f"flurryd node {self.node_id} exited with "
                                       f"{self.process.returncode}:\n{self.log_tail()}")
                try:
                    client.ping()
                    client.get(1)
                    return
                except FlurryError:
                    time.sleep(0.05)
        raise RuntimeError(f"flurryd node {self.node_id} on {self.address} did not serve within "
                           f"{READY_TIMEOUT_S} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL by PID and reap; a no-op once reaped."""
        if self.process.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_servers(count: int, binary: str | None = None, flags: tuple[str, ...] = (),
                  key: Key | None = None) -> list[Flurryd]:
    """`count` ready flurryds with distinct node ids (1..count unless taken on this host), each
    with `flags` and checked ready with `key` (see Flurryd); on any failure every one started
    is stopped before the error propagates."""
    started: list[Flurryd] = []
    candidates = list(range(1, count + 1)) + random.sample(range(count + 1, 1024), NODE_ID_TRIES)
    try:
        while len(started) < count:
            server = Flurryd(candidates.pop(0), binary, flags, key)
            try:
                server.wait_ready()
            except NodeIdTaken:
                server.stop()
                if len(candidates) <= count - len(started) - 1:
                    raise
                continue
            except BaseException:
                server.stop()
                raise
            started.append(server)
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started
