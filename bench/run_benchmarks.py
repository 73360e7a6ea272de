"""Run every deploy benchmark once and write results JSON + docs/benchmarks.md + a PNG.

Usage: ``python bench/run_benchmarks.py [--rtt-ms 25] [--runs 5] [--aplus-runs 3]
[--max-hosts 16] [--workdir /tmp/ddtree-bench]`` (root: sandbox hosts need it). Scenarios:
A (4 hosts: ddtree-deploy vs Ansible vs Fabric), A+ (with the import smoke, vs its compute
floor), B (1/4/16 hosts), C (rollback after a failed health gate), D (re-push, no changes),
then bench/bench_ddtree_builder.py. Tools take turns inside each run, and hosts are reset to
pristine sglang files before every timed run, so each run does the real work.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from harness import BENCH_DIR, BROKEN_MARKER, REPO, BenchHosts, log, start_bench_hosts
from latency_proxy import DelayProxy
from report import write_report
from tools import (
    WARM_CONTROL_DIR,
    ToolRun,
    close_masters,
    event_time_s,
    run_ansible,
    run_ddtree,
    run_fabric,
    run_smoke_floor,
)

sys.path.insert(0, str(REPO))
from ddtree_deploy.inventory import load_inventory  # noqa: E402
from ddtree_deploy.patchset import load_patchset  # noqa: E402
from ddtree_deploy.pipeline import PUSH_REQUESTS  # noqa: E402
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources  # noqa: E402
from ddtree_deploy.stages import op_builders as ops  # noqa: E402
from ddtree_deploy.stages.prepared import prepare_patchset  # noqa: E402
from tests.support import make_patchset, utils_file  # noqa: E402 - the repo's patchset variant builder

SCENARIO_A_HOSTS = 4


def summarise(samples: list[float]) -> dict:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "runs": len(samples),
        "samples_s": [round(s, 3) for s in samples],
    }


def measure_rtt_s(rtt_s: float, tries: int = 5) -> tuple[float, float]:
    """(TCP connect, median ping-pong) through a DelayProxy in front of a local echo server:
    proves the proxy adds what it is told to."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(64):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    proxy = DelayProxy(server.getsockname(), rtt_s).start()
    samples = []
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"x")
        sock.recv(64)
        connect_s = time.monotonic() - started
        for _ in range(tries):
            started = time.monotonic()
            sock.sendall(b"x")
            sock.recv(64)
            samples.append(time.monotonic() - started)
    proxy.stop()
    server.close()
    return connect_s, statistics.median(samples)


def check_deployed(bench: BenchHosts, count: int) -> None:
    """Raise RuntimeError unless every host has every result file and answers health 200."""
    for host in bench.hosts[:count]:
        for rel, data in bench.results.items():
            if (host.site_packages_on_disk / rel).read_bytes() != data:
                raise RuntimeError(f"{host.name}: {rel} is not the result after the run")
        with urllib.request.urlopen(bench.health_url(host), timeout=5) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{host.name}: health {resp.status}")


def variants(root: Path) -> dict[str, Path]:
    """Patchset dirs (each holding ddtree 1.0.0) for the scenarios."""

    def mark_broken(dest: Path) -> None:
        utils = utils_file(dest)
        utils.write_text(utils.read_text() + f"\n# {BROKEN_MARKER}: the service stays 503\n")

    return {
        "none": make_patchset(root / "suites-none", suites=[]),
        "fast": make_patchset(root / "suites-fast", suites=["integrity", "compile"]),
        "imports": make_patchset(root / "suites-imports", suites=["imports"]),
        "broken": make_patchset(root / "suites-broken", suites=[], mutate=mark_broken),
    }


def scenario_a(bench: BenchHosts, dirs: dict[str, Path], runs: int, out: dict) -> None:
    count = SCENARIO_A_HOSTS
    inventory = bench.write_ddtree_inventory(count)
    tools = {
        "ddtree-deploy (suites [])": lambda: run_ddtree(bench, inventory, dirs["none"]),
        "ddtree-deploy (suites integrity+compile)": lambda: run_ddtree(
            bench, inventory, dirs["fast"]
        ),
        "Ansible playbook (cold SSH)": lambda: run_ansible(bench, count),
        "Ansible playbook (warm ControlPersist)": lambda: run_ansible(bench, count, warm=True),
        "Fabric, naive": lambda: run_fabric(bench, count),
    }
    samples: dict[str, list[float]] = {name: [] for name in tools}
    stats: dict[str, list[dict]] = {}
    run_ansible(bench, count, warm=True)  # bring the warm masters up (untimed)
    for i in range(runs):
        for name, fn in tools.items():
            bench.reset(count)
            result: ToolRun = fn()
            check_deployed(bench, count)
            samples[name].append(result.wall_s)
            if result.stats:
                stats.setdefault(name, []).append(result.stats)
            log(f"A run {i + 1}/{runs} {name}: {result.wall_s:.2f} s")
    out["A"] = {name: summarise(s) for name, s in samples.items()}
    out["round_trips"] = {name: per_host_counts(runs) for name, runs in stats.items()}


def per_host_counts(runs: list[dict]) -> dict:
    """Connects and execs per host per push (max over hosts and runs; they never differ)."""
    connects = {h["connects"] for run in runs for h in run.values()}
    execs = {h["execs"] for run in runs for h in run.values()}
    sent = statistics.median(h["bytes_sent"] for run in runs for h in run.values())
    return {
        "connects": sorted(connects),
        "execs": sorted(execs),
        "bytes_sent_median": int(sent),
    }


def scenario_a_plus(
    bench: BenchHosts, dirs: dict[str, Path], runs: int, count: int, out: dict
) -> None:
    inventory = bench.write_ddtree_inventory(count)
    prepared = prepare_patchset(load_patchset(dirs["imports"] / "ddtree" / "1.0.0"))
    host = load_inventory(inventory).hosts[bench.hosts[0].name]
    sources = load_smoke_sources(["imports"], default_smoke_dir())
    smoke = ops.smoke_op(host, bench.site_packages, prepared, sources, 600, ["imports"])
    suite_input = smoke.args["suites"][0]["input"]
    pushes, floors, smoke_host_s = [], [], []
    for i in range(runs):
        bench.reset(count)
        pushed = run_ddtree(bench, inventory, dirs["imports"])
        check_deployed(bench, count)
        floor = run_smoke_floor(bench, count, suite_input)
        pushes.append(pushed.wall_s)
        floors.append(floor.wall_s)
        smoke_host_s += [
            e["duration_s"] for e in pushed.events if e["stage"] == "smoke" and e["event"] == "ok"
        ]
        log(f"A+ run {i + 1}/{runs}: push {pushed.wall_s:.2f} s, floor {floor.wall_s:.2f} s")
    overheads = [p - f for p, f in zip(pushes, floors, strict=True)]
    out["A+"] = {
        "hosts": count,
        "push": summarise(pushes),
        "floor": summarise(floors),
        "overhead": summarise(overheads),
        "smoke_on_host": summarise(smoke_host_s),
    }


def scenario_b(bench: BenchHosts, dirs: dict[str, Path], runs: int, sizes: list[int], out: dict):
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    inventories = {n: bench.write_ddtree_inventory(n) for n in sizes}
    for i in range(runs):
        for n in sizes:
            bench.reset(n)
            result = run_ddtree(bench, inventories[n], dirs["none"])
            check_deployed(bench, n)
            samples[n].append(result.wall_s)
            log(f"B run {i + 1}/{runs} {n} hosts: {result.wall_s:.2f} s")
    out["B"] = {str(n): summarise(s) for n, s in samples.items()}


def scenario_c(bench: BenchHosts, dirs: dict[str, Path], runs: int, rtt_s: float, out: dict):
    """Broken patch: health gate fails after ready_timeout_s, each host rolls back."""
    count = SCENARIO_A_HOSTS
    inventory = bench.write_ddtree_inventory(count, ready_timeout_s=1.0)
    totals, after_decision, on_host, overhead_rtts = [], [], [], []
    for i in range(runs):
        bench.reset(count)
        result = run_ddtree(bench, inventory, dirs["broken"], expect_exit=1)
        totals.append(result.wall_s)
        for host in bench.hosts[:count]:
            mine = [e for e in result.events if e["host"] == host.name]
            decided = next(e for e in mine if e["stage"] == "health" and e["event"] == "fail")
            undone = next(e for e in mine if e["stage"] == "rollback" and e["event"] == "ok")
            gap_s = event_time_s(undone) - event_time_s(decided)
            after_decision.append(gap_s)
            on_host.append(undone["duration_s"])
            overhead_rtts.append((gap_s - undone["duration_s"]) / rtt_s)
            if (host.site_packages_on_disk / bench.prepared.paths[0]).exists():
                raise RuntimeError(f"{host.name}: not rolled back")
        log(f"C run {i + 1}/{runs}: {result.wall_s:.2f} s")
    out["C"] = {
        "push_total": summarise(totals),
        "rollback_after_decision": summarise(after_decision),
        "rollback_on_host": summarise(on_host),
        "network_rtts": {
            "median": round(statistics.median(overhead_rtts), 2),
            "max": round(max(overhead_rtts), 2),
        },
    }


def scenario_d(bench: BenchHosts, dirs: dict[str, Path], runs: int, out: dict) -> None:
    count = SCENARIO_A_HOSTS
    inventory = bench.write_ddtree_inventory(count)
    bench.reset(count)
    run_ddtree(bench, inventory, dirs["none"])  # deployed once; every timed run is a re-push
    samples, stats = [], []
    for i in range(runs):
        result = run_ddtree(bench, inventory, dirs["none"])
        outcomes = {e["data"]["outcome"] for e in result.events if e["stage"] == "summary"}
        if outcomes != {"no_changes"}:
            raise RuntimeError(f"re-push was not a no-op: {outcomes}")
        samples.append(result.wall_s)
        stats.append(result.stats)
        log(f"D run {i + 1}/{runs}: {result.wall_s:.2f} s")
    out["D"] = {"repush": summarise(samples), "round_trips": per_host_counts(stats)}


def profile_ddtree(bench: BenchHosts, dirs: dict[str, Path], runs: int, out: dict) -> None:
    """Where a scenario-A push spends its time: CLI start-up, the hosts, the exit; plus the
    wall of each request round trip seen by the controller vs the agent's own time."""
    count = SCENARIO_A_HOSTS
    inventory = bench.write_ddtree_inventory(count)
    phases: dict[str, list[float]] = {}
    per_request: dict[str, list[float]] = {}
    for i in range(runs):
        bench.reset(count)
        result = run_ddtree(bench, inventory, dirs["none"])
        for name, value in result.phases_s.items():
            phases.setdefault(name, []).append(value)
        for stage, wall_s, agent_s in request_walls(result.events):
            per_request.setdefault(f"{stage}: controller wall", []).append(wall_s)
            per_request.setdefault(f"{stage}: of which on the host", []).append(agent_s)
        log(f"profile run {i + 1}/{runs}: {result.wall_s:.2f} s")
    out["profile"] = {
        "phases": {k: summarise(v) for k, v in phases.items()},
        "requests": {k: summarise(v) for k, v in per_request.items()},
    }
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "ddtree_deploy", "--help"], capture_output=True)
    out["profile"]["cli_help_s"] = round(time.monotonic() - started, 3)


# Each stage of a push -> the stages its request carries (one round trip).
REQUEST_STAGES = {stage: request.stages for request in PUSH_REQUESTS for stage in request.stages}


def request_walls(events: list[dict]) -> list[tuple[str, float, float]]:
    """(first stage, controller wall, agent time) of each request, per host, from events:
    a request's first stage starts when it is sent, and every stage of it (PUSH_REQUESTS)
    ends once its answer came back."""
    found = []
    for host in {e["host"] for e in events}:
        mine = [e for e in events if e["host"] == host and e["event"] in ("start", "ok", "fail")]
        i = 0
        while i < len(mine):
            first = mine[i]
            stages = REQUEST_STAGES.get(first["stage"], (first["stage"],))
            j = i
            while j < len(mine) and mine[j]["stage"] in stages:
                j += 1
            ends = [e for e in mine[i:j] if e["event"] != "start"]
            if first["event"] == "start" and ends:
                wall_s = event_time_s(ends[-1]) - event_time_s(first)
                agent_s = sum(e.get("duration_s") or 0 for e in ends)
                found.append((first["stage"], wall_s, agent_s))
            i = max(j, i + 1)
    return found


def run_builder(repeats: int, out: dict) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / "bench_ddtree_builder.py"), "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    out["builder"] = {"exit_code": done.returncode, "output": done.stdout + done.stderr[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--aplus-runs", type=int, default=3)
    parser.add_argument("--aplus-hosts", type=int, default=SCENARIO_A_HOSTS)
    parser.add_argument("--max-hosts", type=int, default=16)
    parser.add_argument("--builder-repeats", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-bench"))
    parser.add_argument("--only", nargs="*", default=None, help="A A+ B C D profile builder")
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results.json")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    wanted = set(args.only or ["A", "A+", "B", "C", "D", "profile", "builder"])
    rtt_s = args.rtt_ms / 1000
    out: dict = json.loads(args.results.read_text()) if args.only and args.results.exists() else {}
    dirs = variants(args.workdir / "patchsets")
    started = time.monotonic()
    bench = start_bench_hosts(args.workdir, args.max_hosts, dirs["none"], rtt_s)
    first_s, ping_s = measure_rtt_s(rtt_s)
    try:
        setup = {
            "rtt_ms": args.rtt_ms,
            "measured_rtt_ms": round(ping_s * 1000, 1),
            "measured_first_reply_ms": round(first_s * 1000, 1),
            "hosts_started": args.max_hosts,
            "cpus": len(os.sched_getaffinity(0)),
            "python": sys.version.split()[0],
            "ansible": _version(["ansible-playbook", "--version"]),
            "date": time.strftime("%Y-%m-%d"),
            "load_average_at_start": round(os.getloadavg()[0], 1),
        }
        if "setup" not in out:
            out["setup"] = setup
        log(f"setup: {setup}")
        sizes = [n for n in (1, 4, 16) if n <= args.max_hosts]
        steps = [
            ("A", lambda: scenario_a(bench, dirs, args.runs, out)),
            ("A+", lambda: scenario_a_plus(bench, dirs, args.aplus_runs, args.aplus_hosts, out)),
            ("B", lambda: scenario_b(bench, dirs, args.runs, sizes, out)),
            ("C", lambda: scenario_c(bench, dirs, args.runs, rtt_s, out)),
            ("D", lambda: scenario_d(bench, dirs, args.runs, out)),
            ("profile", lambda: profile_ddtree(bench, dirs, args.runs, out)),
        ]
        for name, step in steps:
            if name in wanted:
                step()
                args.results.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        close_masters(WARM_CONTROL_DIR)
        bench.stop()
    if "builder" in wanted:
        run_builder(args.builder_repeats, out)
    key = "bench_wall_s" if not args.only else "bench_wall_s_" + "+".join(sorted(wanted))
    out["setup"][key] = round(time.monotonic() - started, 1)
    out["setup"]["load_average_at_end"] = round(os.getloadavg()[0], 1)
    args.results.write_text(json.dumps(out, indent=2) + "\n")
    write_report(out, args.doc)
    log(f"wrote {args.results} and {args.doc}")
    return 0


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
