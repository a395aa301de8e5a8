#!/usr/bin/env python3
"""tests/dpdk/dpdk_test.py — flurryd --backend dpdk end to end on a veth lab (suite 'dpdk').

  dpdk_test.py serve --pmd af_xdp|af_packet    the full scenario below
  dpdk_test.py two-workers                     2 workers / 2 queues (af_packet fanout), IDs unique
  dpdk_test.py startup-errors                  start-up failures exit non-zero naming the fix
  dpdk_test.py telemetry                       the stock dpdk-telemetry.py (Debian's dpdk-dev)
                                               lists and reads /flurry/{status,stats,watermark,lease}

serve, on its own lab (scripts/lab up --ns flurry-t-<pmd> --veth <prefix> --subnet 10.77.<n>):
  1. flurryd -l 0-1 --no-huge -m 256 --no-pci --vdev=net_<pmd>0,iface=<prefix>0 -- --backend dpdk
  2. ping from the namespace: every echo answered;
  3. 1,000,000 IDs from 4 client threads (tests/dpdk/id_load, the client library), all unique;
  4. malformed frames (raw AF_PACKET from the namespace): each counted under its drop reason
     (flurryctl stats), and the server keeps serving (IDs and ping again);
  5. kill -9 under load, restart on the same state dir: new IDs unique and above all old ones;
  6. SIGTERM: exit 0, "stopped" logged; lab down.
Every wait is bounded; the whole scenario takes well under a minute per PMD. Exit 77 (skip)
only when not root; CI's scripts/test fails the run when the dpdk suite skipped.
Tools come from the environment: FLURRYD, FLURRYCTL, FLURRY, ID_LOAD, LAB, RAW_FRAMES.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
PMDS = {
    # pmd: (namespace, veth prefix, subnet)
    "af_xdp": ("flurry-t-xdp", "flx", "10.77.1"),
    "af_packet": ("flurry-t-pkt", "flp", "10.77.2"),
}
PORT = 7420


class Failure(Exception):
    pass


def log(text):
    print(f"[dpdk_test {time.strftime('%H:%M:%S')}] {text}", flush=True)


def env_path(name):
    value = os.environ.get(name)
    if not value or not os.path.exists(value):
        raise Failure(f"{name} not set or missing ({value!r}); run through meson test")
    return value


def run(cmd, timeout=60, check=True):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


class Lab:
    def __init__(self, ns, prefix, subnet):
        self.ns, self.prefix, self.subnet = ns, prefix, subnet
        self.lab = env_path("LAB")
        self.args = ["--ns", ns, "--veth", prefix, "--subnet", subnet]

    def up(self):
        run([self.lab, "up", *self.args])

    def down(self):
        run([self.lab, "down", *self.args], check=False)

    def host_if(self):
        return self.prefix + "0"

    def ns_if(self):
        return self.prefix + "1"

    def server_ip(self):
        return self.subnet + ".1"

    def exec(self, cmd):
        return ["ip", "netns", "exec", self.ns, *cmd]


class Flurryd:
    def __init__(self, pmd, lab, state_dir, lcores=("-l", "0-1"), vdev_options="", own=()):
        self.pmd, self.lab, self.state_dir = pmd, lab, state_dir
        self.socket = os.path.join(state_dir, "flurryd.sock")
        self.log_path = os.path.join(state_dir, "flurryd.log")
        self.cmd = [env_path("FLURRYD"), *lcores, "--no-huge", "-m", "256", "--no-pci",
                    "--file-prefix", f"flurry-t-{pmd}", f"--vdev=net_{pmd}0,iface={lab.host_if()}{vdev_options}",
                    "--", "--backend", "dpdk", *own,
                    "--listen", f"{lab.server_ip()}:{PORT}", "--state-dir", state_dir,
                    "--control-socket", self.socket]
        self.process = None

    def start(self, timeout_s=30):
        os.makedirs(self.state_dir, exist_ok=True)
        # An XDP program left attached by a killed process would make af_xdp refuse the port.
        run(["ip", "link", "set", "dev", self.lab.host_if(), "xdp", "off"], check=False)
        self.log_file = open(self.log_path, "a")
        # A fresh state dir is a new node: --init on its first start only.
        new_node = [] if os.path.exists(os.path.join(self.state_dir, "watermark")) else ["--init"]
        self.process = subprocess.Popen(self.cmd + new_node, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"flurryd exited {self.process.returncode} at start:\n{self.log_tail()}")
            if os.path.exists(self.socket):
                ping = run(self.lab.exec([env_path("FLURRY"), "ping", "-c", "1", "--server",
                                          f"{self.lab.server_ip()}:{PORT}"]), timeout=10, check=False)
                if ping.returncode == 0:
                    return
            time.sleep(0.2)
        raise Failure(f"flurryd not answering after {timeout_s} s:\n{self.log_tail()}")

    def stop(self, sig=signal.SIGTERM, timeout_s=20):
        if self.process is None:
            return None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise Failure(f"flurryd did not stop within {timeout_s} s after signal {sig}")
        self.process = None
        self.log_file.close()
        return code

    def stats_all(self):
        result = run([env_path("FLURRYCTL"), "--control-socket", self.socket, "--json", "stats"], timeout=10)
        return json.loads(result.stdout)

    def stats(self):
        data = self.stats_all()
        return data.get("total", data)

    def log_tail(self, lines=40):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"


def id_load(lab, ids, threads=4, per_request=16, seconds=60, out=None, above=None, tolerate=False,
            background=False):
    cmd = lab.exec([env_path("ID_LOAD"), "--server", f"{lab.server_ip()}:{PORT}", "--ids", str(ids),
                    "--threads", str(threads), "--per-request", str(per_request), "--seconds", str(seconds)])
    if out:
        cmd += ["--out", out]
    for path in above or []:
        cmd += ["--above", path]
    if tolerate:
        cmd += ["--tolerate-failure"]
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = run(cmd, timeout=seconds + 30, check=False)
    return parse_load(result.returncode, result.stdout, result.stderr)


def parse_load(code, stdout, stderr):
    try:
        summary = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Failure(f"id_load exited {code} without a summary:\n{stdout}\n{stderr}")
    summary["exit"] = code
    return summary


def ping(lab, count=5):
    """Every echo request answered. -w 30: ping waits until all COUNT are answered (or 30 s).
    -W alone does not wait: once replies came, ping(8) lingers only two round trips after the
    last request, and a loaded machine held the last reply longer (fresh-clone CI: "4/5
    answered", 0.1 ms round trips). A worker that does not answer ICMP never replies at all."""
    result = run(lab.exec(["ping", "-c", str(count), "-i", "0.2", "-w", "30", "-W", "5", lab.server_ip()]),
                 timeout=60, check=False)
    received = 0
    for line in result.stdout.splitlines():
        if "received" in line:
            received = int(line.split(",")[1].split()[0])
    if received != count:
        raise Failure(f"ping: {received}/{count} answered:\n{result.stdout}")
    log(f"ping: {received}/{count} answered")


def remove_runtime_dirs(*prefixes):
    """EAL leaves /var/run/dpdk/<file-prefix> behind after it exits; remove ours."""
    for prefix in prefixes:
        shutil.rmtree(os.path.join("/var/run/dpdk", prefix), ignore_errors=True)


def clean_up(lab, state, runtime_prefix, server=None):
    """The end of every scenario, whatever happened: a flurryd still running shows its log tail
    and is killed, the lab comes down, the state dir and EAL's runtime dir are removed."""
    if server is not None and server.process is not None:
        log("flurryd log tail:\n" + server.log_tail())
        server.stop(signal.SIGKILL)
    lab.down()
    shutil.rmtree(state, ignore_errors=True)
    remove_runtime_dirs(runtime_prefix)


def drops(stats):
    """Transport drops by reason, and the handler's request errors as "request:REASON"."""
    counted = dict(stats.get("transport", {}).get("rx_dropped", {}))
    for reason, count in (stats.get("request_errors") or {}).items():
        counted[f"request:{reason}"] = count
    return counted


def stop_cleanly(server):
    """SIGTERM: flurryd must exit 0."""
    code = server.stop(signal.SIGTERM)
    if code != 0:
        raise Failure(f"SIGTERM: exit {code}")


def scenario_serve(pmd):
    ns, prefix, subnet = PMDS[pmd]
    lab = Lab(ns, prefix, subnet)
    state = tempfile.mkdtemp(prefix=f"flurry-dpdk-{pmd}-")
    server = None
    try:
        lab.up()
        server = Flurryd(pmd, lab, state)
        server.start()
        log(f"flurryd up on {pmd}: {server.log_tail(3).strip().splitlines()[-2] if server.log_tail(3) else ''}")

        ping(lab)

        summary = id_load(lab, ids=1_000_000, threads=4, per_request=16, seconds=90)
        log(f"load: {summary}")
        if summary["exit"] != 0 or summary["ids"] < 1_000_000 or not summary["unique"]:
            raise Failure(f"1,000,000 unique IDs expected: {summary}")

        busy_ns = sum(w.get("busy_ns", 0) for w in server.stats_all().get("workers", []))
        if busy_ns <= 0:
            raise Failure(f"the workers' busy time did not move under load: {busy_ns} ns")
        log(f"worker busy time under the load: {busy_ns / 1e6:.1f} ms")

        before = drops(server.stats())
        mac = open(f"/sys/class/net/{lab.host_if()}/address").read().strip()
        raw = run(lab.exec([sys.executable, env_path("RAW_FRAMES"), "--iface", lab.ns_if(), "--dst-mac", mac,
                            "--dst-ip", lab.server_ip(), "--port", str(PORT), "--count", "20"]))
        expected = json.loads(raw.stdout)["expected_drops"]
        if pmd == "af_packet":
            # net_af_packet joins a PACKET_FANOUT group with FLAG_DEFRAG: the kernel holds lone
            # fragments for reassembly, so they never reach the port to be counted.
            expected.pop("ip_fragment", None)
        deadline = time.monotonic() + 10
        while True:
            after = drops(server.stats())
            delta = {reason: after.get(reason, 0) - before.get(reason, 0) for reason in expected}
            missing = {r: (delta[r], n) for r, n in expected.items() if delta[r] < n}
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        log(f"malformed frames: expected {expected}, counted {delta}")
        if missing:
            raise Failure(f"drops not counted by reason (counted, expected): {missing}")
        summary = id_load(lab, ids=20_000, threads=2, seconds=30)
        if summary["exit"] != 0 or not summary["unique"]:
            raise Failure(f"not serving after malformed frames: {summary}")
        ping(lab, count=3)

        # kill -9 under load, restart on the same state directory.
        old = os.path.join(state, "before-kill.ids")
        issued_before = server.stats().get("ids_issued", 0)
        load = id_load(lab, ids=50_000_000, threads=4, per_request=16, seconds=120, out=old, tolerate=True,
                       background=True)
        # Kill once the load is flowing (200,000 IDs issued): bounded at 90 s, well inside the
        # load's own 120 s, however slow the machine.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and server.stats().get("ids_issued", 0) - issued_before < 200_000:
            time.sleep(0.2)
        server.process.kill()
        server.process.wait()
        server.process = None
        server.log_file.close()
        stdout, stderr = load.communicate(timeout=60)
        killed = parse_load(load.returncode, stdout, stderr)
        log(f"kill -9 under load: client got {killed['ids']} IDs before the kill ({killed['error']})")
        if killed["exit"] != 0 or killed["ids"] == 0 or not killed["unique"]:
            raise Failure(f"load before kill -9: {killed}")
        server = Flurryd(pmd, lab, state)
        server.start()
        summary = id_load(lab, ids=200_000, threads=4, seconds=60, above=[old])
        log(f"after restart: {summary}")
        if summary["exit"] != 0 or summary["not_above_earlier"] != 0 or summary["earlier_ids"] != killed["ids"]:
            raise Failure(f"IDs after kill -9 and restart not all above the old ones: {summary}")

        code = server.stop(signal.SIGTERM)
        tail = server.log_tail(5)
        server = None
        if code != 0 or "stopped" not in tail:
            raise Failure(f"SIGTERM: exit {code}, log:\n{tail}")
        log("SIGTERM: clean exit 0")
        return 0
    finally:
        clean_up(lab, state, f"flurry-t-{pmd}", server)


def scenario_two_workers():
    """Two workers, two queue pairs (net_af_packet qpairs=2: the kernel's fanout spreads flows),
    on a 2-CPU machine by mapping lcores 1 and 2 onto CPU 1: both workers serve, IDs from both
    core slices are unique, ping is answered, SIGTERM stops both. 32 client threads (32 flows):
    the fanout hash puts all of them on one queue with probability 2^-31, so "both served" is
    not left to chance."""
    lab = Lab("flurry-t-two", "flw", "10.77.5")
    state = tempfile.mkdtemp(prefix="flurry-dpdk-two-")
    server = None
    try:
        lab.up()
        server = Flurryd("af_packet", lab, state, lcores=("--lcores", "0@0,1@1,2@1"),
                         vdev_options=",qpairs=2", own=("--workers", "2"))
        server.start()
        ping(lab, count=3)
        summary = id_load(lab, ids=400_000, threads=32, per_request=16, seconds=90)
        log(f"load: {summary}")
        if summary["exit"] != 0 or not summary["unique"] or summary["ids"] < 400_000:
            raise Failure(f"400,000 unique IDs expected from two workers: {summary}")
        workers = json.loads(run([env_path("FLURRYCTL"), "--control-socket", server.socket, "--json",
                                  "stats"]).stdout)["workers"]
        issued = [w.get("ids_issued", 0) for w in workers]
        log(f"IDs issued per worker: {issued}")
        if len(issued) != 2 or min(issued) == 0:
            raise Failure(f"both workers should have served: {issued}")
        stop_cleanly(server)
        server = None
        return 0
    finally:
        clean_up(lab, state, "flurry-t-af_packet", server)


TELEMETRY_COMMANDS = ["/flurry/status", "/flurry/stats", "/flurry/watermark", "/flurry/lease"]


def telemetry_keys(answer):
    """The top-level names an answer of the control socket has in DPDK telemetry
    (dataplane/dpdk/telemetry.cc): an array of objects becomes NAME/0, NAME/1, ..."""
    keys = set()
    for key, value in answer.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            keys.update(f"{key}/{i}" for i in range(len(value)))
        else:
            keys.add(key)
    return keys


def ask_telemetry(lines, file_prefix):
    """Sends `lines` through the stock dpdk-telemetry.py; one JSON answer per line."""
    script = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"
    if not os.path.exists(script):
        raise Failure("dpdk-telemetry.py missing: apt-get install -y dpdk-dev (scripts/setup installs it)")
    result = subprocess.run(["/usr/bin/python3", script, "-f", file_prefix], input="\n".join(lines) + "\n",
                            capture_output=True, text=True, timeout=30)
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or len(answers) != len(lines):
        raise Failure(f"dpdk-telemetry.py exited {result.returncode}, {len(answers)} answers to {len(lines)} "
                      f"commands:\n{result.stdout}\n{result.stderr}")
    return answers


def scenario_telemetry():
    """DPDK's telemetry socket, read with the stock client: flurry's four commands are listed
    with their help, and each answers the facts `flurryctl --json` shows (same names; the node,
    state and mode equal; the IDs issued under a load counted)."""
    lab = Lab("flurry-t-tel", "flt", "10.77.6")
    state = tempfile.mkdtemp(prefix="flurry-dpdk-tel-")
    server = None
    try:
        lab.up()
        # Its own node id: a flurryd of the integration suite (another lock) may hold node 0.
        server = Flurryd("af_packet", lab, state, own=("--node-id", "1013"))
        server.start()
        summary = id_load(lab, ids=10_000, threads=1, seconds=30)
        if summary["exit"] != 0 or not summary["unique"]:
            raise Failure(f"10,000 unique IDs expected: {summary}")
        answers = ask_telemetry(["/", *TELEMETRY_COMMANDS, "/help,/flurry/stats"], "flurry-t-af_packet")
        listed = answers[0]["/"]
        log(f"telemetry commands: {[c for c in listed if c.startswith('/flurry')]}")
        missing = [c for c in TELEMETRY_COMMANDS if c not in listed]
        if missing:
            raise Failure(f"not listed by dpdk-telemetry.py: {missing} (listed: {listed})")
        for command, answer in zip(TELEMETRY_COMMANDS, answers[1:]):
            got = answer.get(command)
            name = command.rsplit("/", 1)[1]
            expected = json.loads(run([env_path("FLURRYCTL"), "--control-socket", server.socket, "--json",
                                       name]).stdout)
            log(f"{command}: {json.dumps(got)[:300]}")
            if not isinstance(got, dict) or "error" in got:
                raise Failure(f"{command} answered {answer}")
            absent = telemetry_keys(expected) - set(got)
            if absent:
                raise Failure(f"{command} lacks what flurryctl {name} shows: {sorted(absent)} (it has {sorted(got)})")
        status, stats, _, lease = (answers[i + 1][c] for i, c in enumerate(TELEMETRY_COMMANDS))
        ctl_status = json.loads(run([env_path("FLURRYCTL"), "--control-socket", server.socket, "--json",
                                     "status"]).stdout)
        # Serving, or for a moment degraded_disk: a watermark write pending past stall_ms (a busy
        # disk on a loaded machine) is reported so, rightly, by both answers.
        if status["state"] not in ("serving", "degraded_disk") or status["node_id"] != ctl_status["node_id"] \
                or status["node_id"] != 1013:
            raise Failure(f"/flurry/status {status} against flurryctl status {ctl_status}")
        if stats["total"]["ids_issued"] < 10_000 or "workers/0" not in stats:
            raise Failure(f"/flurry/stats does not count the load: {stats}")
        if lease.get("mode") != "local":
            raise Failure(f"/flurry/lease in local mode: {lease}")
        help_text = answers[-1]["/help"].get("/flurry/stats", "")
        if "flurryctl stats" not in help_text:
            raise Failure(f"/help,/flurry/stats: {answers[-1]}")
        stop_cleanly(server)
        server = None
        return 0
    finally:
        clean_up(lab, state, "flurry-t-af_packet", server)


def scenario_startup_errors():
    lab = Lab("flurry-t-err", "fle", "10.77.3")
    state = tempfile.mkdtemp(prefix="flurry-dpdk-err-")
    flurryd = env_path("FLURRYD")
    cases = [
        # (EAL args, flurryd args, text the error must contain)
        (["-l", "0-1", "--no-huge", "-m", "256", "--no-pci"], ["--listen", "10.77.3.1:7420"],
         "no DPDK port found"),
        (["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--vdev=net_af_packet0,iface=fle0"],
         ["--listen", "10.77.3.1:7420"], "lcores"),
        (["-l", "0-1", "--no-huge", "-m", "256", "--no-pci", "--vdev=net_af_packet0,iface=fle0"],
         ["--listen", "10.77.3.1:7420", "--workers", "2"], "lcores"),
        (["-l", "0-1", "--no-huge", "-m", "256", "--no-pci", "--vdev=net_af_packet0,iface=fle0"],
         ["--listen", "0.0.0.0:7420"], "--listen"),
        (["-l", "0-1", "--no-huge", "-m", "256", "--no-pci", "--vdev=net_af_packet0,iface=flurry-nope0"],
         ["--listen", "10.77.3.1:7420"], "failed to probe"),
    ]
    hugepages = open("/proc/meminfo").read()
    if "HugePages_Total:       0" in hugepages:
        cases.append((["-l", "0-1", "--no-pci"], ["--listen", "10.77.3.1:7420"], "hugepages"))
    try:
        lab.up()
        for index, (eal, own, text) in enumerate(cases):
            cmd = [flurryd, *eal, "--file-prefix", "flurry-t-err", "--", "--backend", "dpdk", *own,
                   "--state-dir", os.path.join(state, str(index)), "--init"]
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            # flurryd's last line: "flurryd: <UTC time> error <why>" (base/log.h).
            error_lines = [l for l in (result.stdout + result.stderr).splitlines()
                           if l.startswith("flurryd: ") and " error " in l]
            log(f"{' '.join(eal + own)} -> exit {result.returncode}: {error_lines}")
            if result.returncode == 0 or not any(text in l for l in error_lines):
                raise Failure(f"expected a non-zero exit naming '{text}':\n{result.stdout}\n{result.stderr}")
        return 0
    finally:
        clean_up(lab, state, "flurry-t-err")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["serve", "two-workers", "startup-errors", "telemetry"])
    parser.add_argument("--pmd", choices=sorted(PMDS), default="af_xdp")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("dpdk_test: needs root (network namespaces, veth, DPDK): skipped", flush=True)
        return SKIP
    try:
        if args.scenario == "serve":
            return scenario_serve(args.pmd)
        if args.scenario == "two-workers":
            return scenario_two_workers()
        if args.scenario == "telemetry":
            return scenario_telemetry()
        return scenario_startup_errors()
    except (Failure, subprocess.TimeoutExpired) as error:
        print(f"dpdk_test: FAIL: {error}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
