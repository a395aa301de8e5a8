"""Suite integration: flurry_client as a user gets it (README "Install", "Quick start").
  * The version is the project's: pyproject.toml's and flurry_client.__version__ equal the
    file VERSION at the repository root (../../VERSION from this client's directory).
  * In a virtual environment made in a temporary directory (python3 -m venv: Debian's
    python3-venv), pip builds the wheel of this directory and installs it, with no package
    index (PIP_NO_INDEX=1, no pip configuration: as offline as it gets), then installs the
    directory itself as the README says (`pip install ./client/python`); the installed
    package's metadata says 0.2.0 and it ships py.typed.
  * The README's quick start, taken from README.md as it is written, runs with the venv's
    Python against a real flurryd (FLURRYD) that this test starts on a free 127.0.0.1 port
    (never 7420: the address in the README is replaced), and every ID it got is unique and of
    that flurryd's node.
Nothing here imports flurry_client: this process runs without PYTHONPATH (meson sets none), and
every subprocess gets an environment without PYTHONPATH, PYTHONHOME or pip settings, with its
working directory in the temporary directory; the system Python's site-packages are never
written (checked: the system Python cannot import flurry_client afterwards). Every process this
test starts is killed by PID; every wait is bounded."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib

import pytest

CLIENT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION_FILE = os.path.join(CLIENT_DIR, "..", "..", "VERSION")
README = os.path.join(CLIENT_DIR, "README.md")
COMMAND_TIMEOUT_S = 300  # one venv or pip command; each takes seconds
READY_TIMEOUT_S = 15.0
NODE_ID_TRIES = 8
NODE_ID_TAKEN = "is already served on this host"
README_SERVER = "127.0.0.1:7420"
QUICK_START_MARK = "<!-- quick start:"


def project_version() -> str:
    with open(VERSION_FILE, encoding="utf-8") as file:
        return file.read().strip()


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what would let a subprocess find the package
    elsewhere or change what pip does."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONNOUSERSITE="1", **extra)
    return env


def run(command: list[str], cwd: str, **env: str) -> str:
    """Runs `command`; its stdout, or a failure with everything it printed."""
    done = subprocess.run(command, cwd=cwd, env=clean_environment(**env), capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (f"{' '.join(command)} exited {done.returncode}\n"
                                  f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done.stdout


def test_version_is_the_projects():
    version = project_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"VERSION holds {version!r}"
    with open(os.path.join(CLIENT_DIR, "pyproject.toml"), "rb") as file:
        assert tomllib.load(file)["project"]["version"] == version
    with open(os.path.join(CLIENT_DIR, "flurry_client", "__init__.py"), encoding="utf-8") as file:
        assert f'\n__version__ = "{version}"\n' in file.read()


@pytest.fixture(scope="module")
def venv():
    """A venv with flurry_client installed from the wheel pip built: (directory, python)."""
    assert "PYTHONPATH" not in os.environ, "this test must not depend on PYTHONPATH"
    directory = tempfile.mkdtemp(prefix="flurry-py-package-")
    try:
        python = os.path.join(directory, "venv", "bin", "python")
        done = subprocess.run([sys.executable, "-m", "venv", os.path.join(directory, "venv")],
                              cwd=directory, env=clean_environment(), capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (f"{sys.executable} -m venv failed (Debian: apt-get install "
                                      f"python3-venv):\n{done.stdout}{done.stderr}")
        dist = os.path.join(directory, "dist")
        # The source tree stays clean: no __pycache__ from importing the build backend.
        run([python, "-m", "pip", "wheel", "--no-deps", "-w", dist, CLIENT_DIR], directory,
            PYTHONDONTWRITEBYTECODE="1")
        wheels = os.listdir(dist)
        assert wheels == [f"flurry_client-{project_version()}-py3-none-any.whl"], wheels
        run([python, "-m", "pip", "install", os.path.join(dist, wheels[0])], directory)
        yield directory, python
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_wheel_installs_in_the_venv_only(venv):
    directory, python = venv
    shown = json.loads(run([python, "-c", (
        "import json, os, sys, importlib.metadata as m, flurry_client as f\n"
        "print(json.dumps({'version': f.__version__, 'metadata': m.version('flurry-client'),\n"
        "  'file': f.__file__, 'typed': os.path.isfile(os.path.join(os.path.dirname(f.__file__),"
        " 'py.typed')), 'prefix': sys.prefix, 'base': sys.base_prefix}))")], directory))
    assert shown["version"] == shown["metadata"] == project_version()
    assert shown["typed"], "py.typed is shipped"
    assert shown["prefix"] != shown["base"] and shown["prefix"].startswith(directory)
    assert shown["file"].startswith(os.path.join(directory, "venv")), shown["file"]


def test_pip_installs_the_directory_as_the_readme_says(venv):
    directory, python = venv
    run([python, "-m", "pip", "uninstall", "--yes", "flurry-client"], directory)
    run([python, "-m", "pip", "install", CLIENT_DIR], directory, PYTHONDONTWRITEBYTECODE="1")
    assert run([python, "-c", "import flurry_client; print(flurry_client.__version__)"],
               directory).strip() == project_version()


def quick_start() -> str:
    """The first python block after the README's quick start mark, as written."""
    with open(README, encoding="utf-8") as file:
        text = file.read()
    assert QUICK_START_MARK in text, f"README.md has no {QUICK_START_MARK!r} line"
    after = text[text.index(QUICK_START_MARK):]
    block = re.search(r"^```python\n(.*?)^```", after, re.MULTILINE | re.DOTALL)
    assert block, "no python block after the quick start mark"
    assert block.group(1).count(README_SERVER) == 1, f"the quick start asks {README_SERVER}"
    return block.group(1)


def free_udp_port() -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port != 7420:  # where scripts/run's flurryd may be serving
            return port
    raise AssertionError("no free UDP port but 7420")


# Asks a flurryd once for one ID with the installed package: exit 0 when it served.
READY_CHECK = """
import sys
from flurry_client import Client, FlurryError
try:
    with Client(servers=[sys.argv[1]], timeout_ms=200, attempts=1, retry_budget_ms=500) as c:
        c.get(1)
except FlurryError as error:
    sys.exit(str(error))
"""


class Flurryd:
    """One flurryd in `directory` on a free loopback port, node `node_id`; kill() by PID."""

    def __init__(self, directory: str, node_id: int):
        binary = os.environ.get("FLURRYD", "")
        assert binary and os.access(binary, os.X_OK), (
            f"FLURRYD={binary!r} is not an executable flurryd; meson sets it")
        self.node_id = node_id
        self.address = f"127.0.0.1:{free_udp_port()}"
        self.log_path = os.path.join(directory, f"flurryd-{node_id}.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, "--init", "--state-dir", os.path.join(directory, f"state-{node_id}"),
                 "--listen", self.address,
                 "--control-socket", os.path.join(directory, f"ctl-{node_id}.sock"),
                 "--node-id", str(node_id)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory)

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            return "".join(log.readlines()[-15:])

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def start_flurryd(directory: str, python: str) -> Flurryd:
    """A serving flurryd; another node id when this host already serves the one tried."""
    for node_id in random.sample(range(1, 1024), NODE_ID_TRIES):
        server = Flurryd(directory, node_id)
        deadline = time.monotonic() + READY_TIMEOUT_S
        why = ""
        while time.monotonic() < deadline and server.process.poll() is None:
            check = subprocess.run([python, "-c", READY_CHECK, server.address], cwd=directory,
                                   env=clean_environment(), capture_output=True, text=True,
                                   timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
            if check.returncode == 0:
                return server
            why = check.stderr.strip()
            time.sleep(0.05)
        server.kill()
        if NODE_ID_TAKEN not in server.log():
            raise AssertionError(f"flurryd on {server.address} did not serve within "
                                 f"{READY_TIMEOUT_S} s ({why}):\n{server.log()}")
    raise AssertionError(f"{NODE_ID_TRIES} node ids tried, each already served on this host")


# Runs the quick start as a script and reports what it left behind, on one marked line.
QUICK_START_RUNNER = """
import json, runpy
found = runpy.run_path("quick_start.py", run_name="__main__")
ids, one, layout = found["ids"], found["one"], found["layout"]
nodes = sorted({layout.decode(id_).node for id_ in ids + [one]})
print("QUICK-START " + json.dumps({"ids": ids, "one": one, "nodes": nodes}))
"""


def test_the_readme_quick_start_runs_against_a_real_flurryd(venv):
    directory, python = venv
    code = quick_start()
    server = start_flurryd(directory, python)
    try:
        with open(os.path.join(directory, "quick_start.py"), "w", encoding="utf-8") as file:
            file.write(code.replace(README_SERVER, server.address))
        # The quick start keeps the client's defaults (5 attempts of 100 ms), which a fresh
        # interpreter on a loaded machine can miss: "no answer from" says the machine was slow,
        # not that the quick start is wrong, so such a run is run again (at most 3 runs).
        for attempt in range(1, 4):
            try:
                output = run([python, "-c", QUICK_START_RUNNER], directory)
                break
            except AssertionError as failure:
                if attempt == 3 or "no answer from" not in str(failure):
                    raise
    finally:
        server.kill()
    printed, marked = output.rsplit("QUICK-START ", 1)
    print(printed)  # what the quick start printed itself
    result = json.loads(marked)
    ids = result["ids"] + [result["one"]]
    assert len(result["ids"]) == 1000
    assert len(set(ids)) == len(ids) == 1001, "duplicate IDs"
    assert result["nodes"] == [server.node_id]
    lines = printed.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"1000 {result['one']} Decoded("), lines
    base32, readable, uuid_text = lines[1].split()
    assert len(base32) == 13 and "ORD" in readable and len(uuid_text) == 36, lines


def test_the_system_python_was_not_touched(venv):
    directory, _ = venv
    found = run([sys.executable, "-c",
                 "import importlib.util; print(importlib.util.find_spec('flurry_client'))"],
                directory)
    assert found.strip() == "None", "flurry_client is importable by the system Python"
