"""Where a fleet push's CPU goes on this machine, by process: the controller, each host's
agent, the service commands the agent runs, sshd, the delay proxies.

Usage: ``python bench/host_cpu.py [--hosts 1 16] [--runs 3] [--rtt-ms 25]
[--workdir /tmp/ddtree-bench-hostcpu]`` (root; needs `accton`, Debian/Ubuntu package
`acct`). Starts max(--hosts) bench hosts, then per run and size pushes scenario A's
patchset (suites []) with BSD process accounting on, waits until the hosts' agents have
exited, and sums the CPU of every process that ended, by its role (found from the parent
pids the accounting records). Prints the per-host median of each role over the runs.

Why: `make bench` sees the machine's busy CPU and the controller's; the sandbox hosts share
the machine, so "the rest" hides which host-side process costs what. The accounting's
per-process times come in 10 ms ticks, rounded down: roles made of many tiny processes
read low.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from harness import log, machine_cpu_s, own_cpu_s, start_bench_hosts
from run_benchmarks import check_deployed, variants
from tools import run_ddtree

# struct acct_v3 (linux/acct.h): 64 bytes; we read version, pids, times and the command name.
_ACCT_V3 = struct.Struct("<BBHIIIIIIfHHHHHHHH16s")
AGENT_WAIT_S = 1.5  # the controller exits without waiting for the agents' EOF


def _comp_t(value: int) -> float:
    """A comp_t (13-bit mantissa, 3-bit base-8 exponent) of AHZ=100 ticks, in seconds."""
    return ((value & 0x1FFF) << (3 * (value >> 13))) / 100


def read_accounting(path: Path) -> list[dict]:
    """Every record of a v3 process accounting file: pid, ppid, comm, cpu_s."""
    data, records = path.read_bytes(), []
    for offset in range(0, len(data) - _ACCT_V3.size + 1, _ACCT_V3.size):
        fields = _ACCT_V3.unpack_from(data, offset)
        if fields[1] != 3:  # ac_version
            continue
        pid, ppid, utime, stime, comm = fields[6], fields[7], fields[10], fields[11], fields[18]
        records.append(
            {
                "pid": pid,
                "ppid": ppid,
                "comm": comm.split(b"\0")[0].decode(errors="replace"),
                "cpu_s": _comp_t(utime) + _comp_t(stime),
            }
        )
    return records


def roles(records: list[dict], controller_parent: int) -> dict[str, float]:
    """CPU seconds by role. The agent is `python` started by sshd (or orphaned: its sshd
    ended first); the service commands are `python` children of another python, the
    controller the one this process started."""
    by_pid = {r["pid"]: r for r in records}
    out: dict[str, float] = defaultdict(float)
    for record in records:
        parent = by_pid.get(record["ppid"])
        comm = record["comm"]
        if comm != "python":
            role = comm
        elif record["ppid"] == controller_parent:
            role = "controller"
        elif parent is not None and parent["comm"] == "python":
            role = "service commands"
        else:
            role = "agent (and stopped servers)"
        out[role] += record["cpu_s"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-bench-hostcpu"))
    args = parser.parse_args()
    dirs = variants(args.workdir / "patchsets")
    bench = start_bench_hosts(args.workdir, max(args.hosts), dirs["none"], args.rtt_ms / 1000)
    per_host: dict[int, dict[str, list[float]]] = {n: defaultdict(list) for n in args.hosts}
    try:
        inventories = {n: bench.write_ddtree_inventory(n) for n in args.hosts}
        for run in range(args.runs):
            for n in args.hosts:
                bench.reset(n)
                acct = args.workdir / f"pacct-{n}"
                acct.write_bytes(b"")
                machine, proxies = machine_cpu_s(), own_cpu_s()
                subprocess.run(["accton", str(acct)], check=True, capture_output=True)
                try:
                    pushed = run_ddtree(bench, inventories[n], dirs["none"])
                    time.sleep(AGENT_WAIT_S)
                finally:
                    subprocess.run(["accton", "off"], check=True, capture_output=True)
                machine, proxies = machine_cpu_s() - machine, own_cpu_s() - proxies
                check_deployed(bench, n)
                split = roles(read_accounting(acct), os.getpid())
                split["delay proxies"] = proxies
                split["not in a process that ended"] = machine - sum(split.values())
                for role, cpu_s in split.items():
                    per_host[n][role].append(cpu_s / n)
                per_host[n]["wall s"].append(pushed.wall_s)
                log(f"run {run + 1}, {n} hosts: wall {pushed.wall_s:.2f} s, {dict(split)}")
    finally:
        bench.stop()
    for n, table in per_host.items():
        print(f"== {n} hosts: median over {args.runs} runs, CPU s per host")
        for role, values in sorted(table.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {role:32s} {statistics.median(values):7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
