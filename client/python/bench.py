"""A small bounded benchmark of the Python client against a local flurryd:
  * get(1), one request in flight (blocking Client, then AsyncClient): requests/s, p50/p99;
  * next() through the prefetch buffer: IDs/s;
  * get(n) in batches: IDs/s.
Every ID is checked for duplicates. Each phase runs for --seconds (1..60) or --count-max calls,
whichever ends first. Starts its own flurryd (node 1, fresh temp dir, killed by PID at the end)
from --flurryd or $FLURRYD, unless --server names a running one.

    FLURRYD=build/control/flurryd /usr/bin/python3 client/python/bench.py --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))

from flurry_client import AsyncClient, Client  # noqa: E402
from flurryd_process import start_servers  # noqa: E402


def percentile(sorted_ns: list[int], fraction: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(fraction * len(sorted_ns)))] / 1000


def report_latency(name: str, latencies_ns: list[int], elapsed_s: float) -> None:
    latencies_ns.sort()
    print(f"{name:<34} {len(latencies_ns) / elapsed_s:>12,.0f} requests/s   "
          f"p50 {percentile(latencies_ns, 0.50):7.1f} us   p99 {percentile(latencies_ns, 0.99):7.1f} us"
          f"   ({len(latencies_ns):,} calls)")


def report_rate(name: str, ids: int, elapsed_s: float) -> None:
    print(f"{name:<34} {ids / elapsed_s:>12,.0f} IDs/s        ({ids:,} IDs in {elapsed_s:.2f} s)")


def timed_calls(call, seconds: float, count_max: int, seen: set[int]) -> tuple[list[int], float]:
    latencies = []
    start = time.perf_counter()
    end = start + seconds
    while len(latencies) < count_max and time.perf_counter() < end:
        before = time.perf_counter_ns()
        seen.update(call())
        latencies.append(time.perf_counter_ns() - before)
    return latencies, time.perf_counter() - start


async def async_get_one(server: str, seconds: float, count_max: int, seen: set[int]):
    async with await AsyncClient.open(servers=[server]) as client:
        latencies = []
        start = time.perf_counter()
        end = start + seconds
        while len(latencies) < count_max and time.perf_counter() < end:
            before = time.perf_counter_ns()
            seen.update(await client.get(1))
            latencies.append(time.perf_counter_ns() - before)
        return latencies, time.perf_counter() - start


def run(server: str, seconds: float, count_max: int) -> None:
    seen: set[int] = set()
    total = 0
    with Client(servers=[server]) as client:
        latencies, elapsed = timed_calls(lambda: client.get(1), seconds, count_max, seen)
        report_latency("get(1), blocking, 1 in flight", latencies, elapsed)
        total += len(latencies)
    latencies, elapsed = asyncio.run(async_get_one(server, seconds, count_max, seen))
    report_latency("get(1), asyncio, 1 in flight", latencies, elapsed)
    total += len(latencies)
    with Client(servers=[server], prefetch=65_536) as client:
        client.next()  # the first fill
        ids, elapsed = timed_calls(lambda: (client.next(),), seconds, count_max * 50, seen)
        report_rate("next(), prefetch 65536", len(ids), elapsed)
        total += len(ids)
    with Client(servers=[server], ids_per_request=65_536) as client:
        calls, elapsed = timed_calls(lambda: client.get(65_536), seconds, count_max, seen)
        report_rate("get(65536), batches", len(calls) * 65_536, elapsed)
        total += len(calls) * 65_536
    assert len(seen) == total, f"{total - len(seen)} duplicate IDs"
    print(f"all {total:,} IDs unique")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="HOST:PORT of a running flurryd (else one is started)")
    parser.add_argument("--flurryd", default=os.environ.get("FLURRYD"), help="flurryd binary")
    parser.add_argument("--seconds", type=float, default=3.0, help="per phase, 1..60")
    parser.add_argument("--count-max", type=int, default=1_000_000, help="calls per phase")
    args = parser.parse_args()
    if not 1 <= args.seconds <= 60:
        parser.error("--seconds must be 1..60")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    if args.server:
        run(args.server, args.seconds, args.count_max)
        return 0
    if not args.flurryd:
        parser.error("pass --server HOST:PORT, or --flurryd PATH (or set FLURRYD)")
    servers = start_servers(1, args.flurryd)
    try:
        run(servers[0].address, args.seconds, args.count_max)
    finally:
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
