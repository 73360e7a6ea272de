"""Run every deploy benchmark once and write results JSON + docs/benchmarks.md + a PNG.

Usage: ``python bench/run_benchmarks.py [--rtt-ms 25] [--a-rtts-ms 0 25 100] [--runs 5]
[--hosts 1 4 16 64] [--import-runs 3] [--bctl-runs 3] [--bctl-hosts 1 16 64 256 1000]
[--bctl-pinned-hosts 1 16] [--workdir /tmp/ddtree-bench] [--only A B ...]`` (root: sandbox
hosts need it). Scenarios: A (4 hosts: ddtree-deploy vs Ansible, the floor, bare ssh,
pyinfra, and Fabric at 25 ms, at each RTT), A+ (with the import smoke, vs its compute floor),
B (1/4/16/64 hosts), B-ctl (the controller alone: recorded-answer stand-in hosts, timing
only, and real hosts pinned away from the controller; scenario_controller.py), C (rollback
after a failed health gate), D (re-push, no changes), I (the `imports` suite vs one process
importing every patched module), profile, builder (bench/bench_ddtree_builder.py) and
builder-ref (the builder vs the reference's algorithm, when that bench module exists;
`--builder-ref-rounds`, 201) and V (time to a verified server: every gate on real sglang
servers, its own sandbox; `--v-hosts` 1, `--v-runs` 3, `--v-serial` for the paired
before/after of the reference cut; scenario_verified.py). Only the host
scenarios start the sandbox hosts.

Every comparison is interleaved: each run takes every contender once, back to back (ours,
Ansible, ours, Ansible, …), so load drift on a shared machine hits both alike; ratios are
taken per run and their median reported. Each run records the 1-minute load average and the
tool's CPU seconds (RUSAGE_CHILDREN delta). Hosts are reset to pristine sglang files before
every timed run, so each run does the real work.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import (
    BENCH_DIR,
    REPO,
    BenchHosts,
    log,
    machine_cpu_s,
    own_cpu_s,
    start_bench_hosts,
)
from latency_proxy import measure_rtt_s
from report import write_report
from scenario_a import (  # check_deployed, variants: bench/host_cpu.py, profile_fleet.py use them
    SCENARIO_A_HOSTS,
    check_deployed,
    per_host_counts,
    scenario_a,
    summarise_runs,
    variants,
)
from scenario_controller import scenario_b_controller
from scenario_gates import scenario_a_plus, scenario_i
from scenario_verified import scenario_verified
from summary import paired_ratios, summarise
from tools import (
    WARM_CONTROL_DIR,
    ToolRun,
    ansible_playbook,
    close_masters,
    event_time_s,
    run_ddtree,
)

sys.path.insert(0, str(REPO))
from ddtree_deploy.pipeline import PUSH_REQUESTS  # noqa: E402


def scenario_b(bench: BenchHosts, dirs: dict[str, Path], runs: int, sizes: list[int], out: dict):
    """Scenario A's push on 1, 4, 16, 64 hosts, sizes interleaved run by run, all hosts at
    once (``--parallel N``); wall and CPU per host: the controller's, the delay proxies'
    (this process) and the rest of the machine's (the sandbox hosts' sshd, agents and
    service commands, plus whatever other sessions ran meanwhile)."""
    taken: dict[int, list[ToolRun]] = {n: [] for n in sizes}
    on_hosts: dict[int, list[float]] = {n: [] for n in sizes}  # and other sessions' work
    on_proxies: dict[int, list[float]] = {n: [] for n in sizes}
    inventories = {n: bench.write_ddtree_inventory(n) for n in sizes}
    for i in range(runs):
        for n in sizes:
            bench.reset(n)
            machine_s, proxies_s = machine_cpu_s(), own_cpu_s()
            result = run_ddtree(bench, inventories[n], dirs["none"], extra=["--parallel", str(n)])
            machine_s, proxies_s = machine_cpu_s() - machine_s, own_cpu_s() - proxies_s
            check_deployed(bench, n)
            on_hosts[n].append((machine_s - proxies_s - result.cpu_s) / n)
            on_proxies[n].append(proxies_s / n)
            taken[n].append(result)
            log(f"B run {i + 1}/{runs} {n} hosts: {result.wall_s:.2f} s, controller CPU "
                f"{result.cpu_s / n:.3f} s/host, rest of machine {on_hosts[n][-1]:.3f} s/host, "
                f"load {result.load_1m:.1f}")  # fmt: skip
    one = [r.wall_s for r in taken[sizes[0]]]
    out["B"] = {
        str(n): {
            **summarise_runs(taken[n]),
            "cpu_per_host": summarise([r.cpu_s / n for r in taken[n]]),
            "hosts_cpu_per_host": summarise(on_hosts[n]),
            "proxies_cpu_per_host": summarise(on_proxies[n]),
            "ratio": paired_ratios([r.wall_s for r in taken[n]], one),
            "cpus": len(os.sched_getaffinity(0)),
        }
        for n in sizes
    }
    for n in sizes:
        out["B"][str(n)]["load_1m"] = {
            "median": statistics.median(out["B"][str(n)]["load_1m"]),
            "all": out["B"][str(n)]["load_1m"],
        }


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


def _request_stages() -> dict[str, tuple[str, ...]]:
    """Each stage of a push -> the stages its request carries (one round trip); a push with
    no serving gate sends a request that `joins` a later one together with it."""
    found: dict[str, tuple[str, ...]] = {}
    for i, request in enumerate(PUSH_REQUESTS):
        later = [r for r in PUSH_REQUESTS[i + 1 :] if r.stages[0] == request.joins]
        sent = request.joined(later[0]) if later else request
        for stage in sent.stages:
            found.setdefault(stage, sent.stages)
    return found


REQUEST_STAGES = _request_stages()


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


# bench/builder_vs_reference.py: ``run(repeats=..., threads=(1, 2)) -> dict``
# with ``rows``: [{budget, threads, ours_ms, ref_ms ({median, min, max}), ratio, met}, ...].
BUILDER_VS_REFERENCE_MODULE = "builder_vs_reference"


def builder_rows(repeats: int, out: dict) -> None:
    """The builder vs the reference's algorithm, from BUILDER_VS_REFERENCE_MODULE if it is
    there; otherwise the result says it was not run and why."""
    try:
        module = importlib.import_module(BUILDER_VS_REFERENCE_MODULE)
    except ImportError as exc:
        out["builder_vs_reference"] = {"why": f"not run: {exc}"}
        return
    out["builder_vs_reference"] = module.run(repeats=repeats)


# The scenarios that need the sandbox hosts (the builder rows run without them).
HOST_SCENARIOS = {"A", "A+", "B", "B-ctl", "C", "D", "I", "profile"}


def run_host_scenarios(
    args: argparse.Namespace,
    wanted: set[str],
    rtt_s: float,
    max_hosts: int,
    started: float,
    out: dict,
) -> None:
    """Start the bench hosts, record the setup, run the wanted host scenarios (writing
    args.results after each), stop the hosts."""
    dirs = variants(args.workdir / "patchsets")
    bench = start_bench_hosts(args.workdir, max_hosts, dirs["none"], rtt_s)
    first_s, ping_s = measure_rtt_s(rtt_s)
    try:
        setup = {
            "rtt_ms": args.rtt_ms,
            "measured_rtt_ms": round(ping_s * 1000, 1),
            "measured_first_reply_ms": round(first_s * 1000, 1),
            "hosts_started": max_hosts,
            "sandbox_start_s": round(time.monotonic() - started, 1),
            "memory_used_mib_at_start": _memory_used_mib(),
            "cpus": len(os.sched_getaffinity(0)),
            "python": sys.version.split()[0],
            "ansible": _version([ansible_playbook(), "--version"]),
            "date": time.strftime("%Y-%m-%d"),
            "load_average_at_start": round(os.getloadavg()[0], 1),
            **machine_speed(),
        }
        out["setup"] = {**out.get("setup", {}), **setup}  # an --only run keeps the rest
        log(f"setup: {setup}")
        sizes = sorted(set(args.hosts))
        steps = [
            ("A", lambda: scenario_a(bench, dirs, args.runs, args.a_rtts_ms, rtt_s, out)),
            ("A+", lambda: scenario_a_plus(bench, dirs, args.aplus_runs, args.aplus_hosts, out)),
            ("B", lambda: scenario_b(bench, dirs, args.runs, sizes, out)),
            ("B-ctl", lambda: scenario_b_controller(bench, dirs["none"], args, out)),
            ("C", lambda: scenario_c(bench, dirs, args.runs, rtt_s, out)),
            ("D", lambda: scenario_d(bench, dirs, args.runs, out)),
            ("I", lambda: scenario_i(bench, dirs, args.import_runs, out)),
            ("profile", lambda: profile_ddtree(bench, dirs, args.runs, out)),
        ]
        for name, step in steps:
            if name in wanted:
                step()
                args.results.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        close_masters(WARM_CONTROL_DIR)
        bench.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--aplus-runs", type=int, default=3)
    parser.add_argument("--aplus-hosts", type=int, default=SCENARIO_A_HOSTS)
    parser.add_argument("--a-rtts-ms", type=float, nargs="+", default=[0.0, 25.0, 100.0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--import-runs", type=int, default=3)
    parser.add_argument("--bctl-runs", type=int, default=3)
    parser.add_argument(
        "--bctl-hosts", type=int, nargs="+", default=[1, 16, 64, 256, 1000],
        help="B-ctl fleet sizes against the recorded-answer stand-in (timing only)",
    )  # fmt: skip
    parser.add_argument(
        "--bctl-pinned-hosts", type=int, nargs="+", default=[1, 16],
        help="B-ctl sizes on real sandbox hosts pinned away from the controller (all tools)",
    )  # fmt: skip
    parser.add_argument("--builder-repeats", type=int, default=5)
    parser.add_argument("--v-hosts", type=int, default=1, help="V: real sglang hosts")
    parser.add_argument("--v-runs", type=int, default=3, help="V: pushes with every gate")
    parser.add_argument(
        "--v-serial", action="store_true",
        help="V: each run also pushes with the reference as its own request, the path before "
        "it ran beside the smoke suites (bench only), interleaved, for the paired table",
    )  # fmt: skip
    parser.add_argument(
        "--builder-ref-rounds",
        type=int,
        default=201,
        help="rounds per row of builder-ref (≈ 30 s in all; its two-thread rows need many)",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-bench"))
    parser.add_argument(
        "--only", nargs="*", default=None, help="A A+ B B-ctl C D I profile builder builder-ref V"
    )
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results.json")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    everything = ["A", "A+", "B", "B-ctl", "C", "D", "I", "profile", "builder", "builder-ref", "V"]
    wanted = set(args.only or everything)
    rtt_s = args.rtt_ms / 1000
    max_hosts = max([*args.hosts, *args.bctl_pinned_hosts, SCENARIO_A_HOSTS, args.aplus_hosts])
    out: dict = json.loads(args.results.read_text()) if args.only and args.results.exists() else {}
    started = time.monotonic()
    if wanted & HOST_SCENARIOS:
        run_host_scenarios(args, wanted, rtt_s, max_hosts, started, out)
    if "builder" in wanted:
        run_builder(args.builder_repeats, out)
    if "builder-ref" in wanted:
        builder_rows(args.builder_ref_rounds, out)
    if "V" in wanted:  # its own sandbox of real sglang servers, after the bench hosts stopped
        try:
            scenario_verified(
                args.workdir / "verified", args.v_hosts, args.v_runs, out, args.v_serial
            )
        except RuntimeError as exc:  # a failed push: the report says so, the rest is kept
            out["V"] = {"why": f"a push failed ({str(exc).splitlines()[0]})"}
            log(f"V failed: {exc}")
    key = "bench_wall_s" if not args.only else "bench_wall_s_" + "+".join(sorted(wanted))
    setup = out.setdefault("setup", {})
    setup[key] = round(time.monotonic() - started, 1)
    setup["load_average_at_end"] = round(os.getloadavg()[0], 1)
    args.results.write_text(json.dumps(out, indent=2) + "\n")
    write_report(out, args.doc)
    log(f"wrote {args.results} and {args.doc}")
    return 0


def _memory_used_mib() -> int:
    """MemTotal − MemAvailable from /proc/meminfo, MiB (what the sandbox hosts cost)."""
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    kib = int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])
    return kib // 1024


def machine_speed(samples: int = 5) -> dict[str, float]:
    """Return the box's speed as two medians in ms: a fixed pure-Python loop (one core) and
    `python -c pass` (an interpreter start, site hooks included). Absolute times move with
    the machine from day to day; these let two runs' tables be told apart by it."""
    loops, starts = [], []
    for _ in range(samples):
        started = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i * i
        loops.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        starts.append((time.perf_counter() - started) * 1000)
    return {
        "python_loop_ms": round(statistics.median(loops), 1),
        "python_start_ms": round(statistics.median(starts), 1),
    }


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
