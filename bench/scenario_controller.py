"""Scenario B-ctl: the controller alone, its CPU per host and wall time vs fleet size.

Two parts, each interleaved run by run:

1. **Stand-in hosts** (TIMING ONLY, labelled so in the report): one push is recorded on a
   real sandbox host (every framed agent answer, bench/ddtree_push.py), then ddtree-deploy
   pushes to 1 … 1,000 inventory hosts that all reach one real OpenSSH sshd whose sessions
   replay those answers (bench/standin_agent.py). sshd and the replays run on the host
   cores, the controller on its own core (`taskset`), `--parallel min(N, PARALLEL)`.
2. **Pinned real hosts**: on the sandbox hosts (real agents, real service), the sshd
   processes and this bench process's proxy threads pinned to the host cores, every tool
   (ours, Ansible cold, pyinfra) started on the controller core: controller CPU per host
   measured the same way for all three (RUSAGE_CHILDREN of the tool's process tree).

Where the machine cannot keep the two apart (one core) the result says why instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from argparse import Namespace
from pathlib import Path

from ddtree_push import RECORD_ENV
from harness import BenchHosts, log, machine_cpu_s, own_cpu_s
from pyinfra_peer import PYINFRA, pyinfra_bin, run_pyinfra
from standin_sshd import (
    STANDIN,
    all_cpus,
    cpu_list,
    pin_process,
    split_cpus,
    standin_inventory,
    start_standin,
)
from summary import ANSIBLE_COLD, DDTREE_A, paired_ratios, summarise
from tools import ToolRun, ansible_playbook, run_ansible, run_ddtree

PARALLEL = 64
ONE_CORE_WHY = "one CPU core: the controller and the hosts cannot be kept apart"


def record_frames(bench: BenchHosts, patchsets: Path) -> list[str]:
    """One real push on sandbox host 0, every agent answer recorded in order."""
    path = bench.workdir / "recorded-frames.json"
    bench.reset(1)
    run_ddtree(bench, bench.write_ddtree_inventory(1), patchsets, env={RECORD_ENV: str(path)})
    bench.reset(1)
    frames = json.loads(path.read_text())["frames"]
    return frames[bench.hosts[0].name]


def scenario_b_controller(bench: BenchHosts, patchsets: Path, args: Namespace, out: dict) -> None:
    """Both parts (args: bctl_runs, bctl_hosts for the stand-in, bctl_pinned_hosts for the
    real hosts); out["B_ctl"] gets the stand-in table and the pinned real-host table."""
    runs, standin_sizes = args.bctl_runs, sorted(set(args.bctl_hosts))
    pinned_sizes = sorted(set(args.bctl_pinned_hosts))
    cores = all_cpus()
    split = split_cpus(cores)
    result: dict = {"cpus": len(cores), "parallel": PARALLEL}
    if split is None:
        result["why"] = ONE_CORE_WHY
        out["B_ctl"] = result
        return
    controller, hosts = split
    result["controller_cores"], result["host_cores"] = cpu_list(controller), cpu_list(hosts)
    frames = record_frames(bench, patchsets)
    result["recorded_answers"] = len(frames)
    result["standin"] = standin_runs(bench, patchsets, frames, runs, standin_sizes, split)
    result["pinned"] = pinned_runs(bench, patchsets, runs, pinned_sizes, split)
    out["B_ctl"] = result


def _controller_only(split: tuple[set[int], set[int]], pids: list[int]) -> None:
    """This process's threads (the delay proxies) and `pids` (sshds) onto the host cores,
    then this thread (which starts every tool: they inherit it) onto the controller's."""
    controller, hosts = split
    for pid in [os.getpid(), *pids]:
        pin_process(pid, hosts)
    os.sched_setaffinity(0, controller)


def _unpin(pids: list[int]) -> None:
    cores = set(range(os.cpu_count() or 1))
    for pid in [os.getpid(), *pids]:
        try:
            pin_process(pid, cores)
        except Exception as exc:  # a host that already ended needs nothing
            log(f"unpin {pid}: {exc}")
    os.sched_setaffinity(0, cores)


def _wait_replays_gone(limit_s: float = 120.0) -> None:
    """Wait until no stand-in session of an earlier run is still ending: 1,000 sessions
    take seconds to wind down on the host core, and a run started meanwhile (the 1-host
    one after the 1,000) timed their teardown (4.2 s against 0.5 s)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not subprocess.run(["pgrep", "-f", str(STANDIN)], capture_output=True).stdout:
            return
        time.sleep(0.2)
    log(f"B-ctl: stand-in sessions still running after {limit_s:.0f} s")


def standin_runs(
    bench: BenchHosts,
    patchsets: Path,
    frames: list[str],
    runs: int,
    sizes: list[int],
    split: tuple[set[int], set[int]],
) -> dict:
    """ddtree-deploy against the stand-in at each size, sizes interleaved run by run."""
    standin = start_standin(
        bench.workdir / "standin",
        Path(f"{bench.sandbox.identity_file}.pub"),
        json.dumps({"frames": frames}),
        split[1],
        max(sizes),
    )
    one_host = bench.write_ddtree_inventory(1).read_text()
    inventories = {}
    for n in sizes:
        path = bench.workdir / f"standin-inventory-{n}.toml"
        path.write_text(
            standin_inventory(one_host, standin.ports[:n], str(standin.files.known_hosts))
        )
        inventories[n] = path
    taken: dict[int, list[ToolRun]] = {n: [] for n in sizes}
    rest: dict[int, list[float]] = {n: [] for n in sizes}  # the stand-in's sshds, other work
    try:
        _controller_only(split, [])
        # untimed: the first sessions of fresh sshds (and their replay's python) start cold
        run_ddtree(bench, inventories[sizes[0]], patchsets, extra=["--parallel", "1"])
        for i in range(runs):
            for n in sizes:
                extra = ["--parallel", str(min(n, PARALLEL))]
                _wait_replays_gone()
                machine_s, own_s = machine_cpu_s(), own_cpu_s()
                run = run_ddtree(bench, inventories[n], patchsets, extra=extra)
                rest_s = machine_cpu_s() - machine_s - (own_cpu_s() - own_s) - run.cpu_s
                rest[n].append(rest_s / n)
                asked = {h["execs"] for h in run.stats.values()}
                if len(run.stats) != n or asked != {len(frames)}:
                    raise RuntimeError(
                        f"stand-in run of {n} hosts: {len(run.stats)} hosts, "
                        f"requests per host {asked}, recorded {len(frames)}"
                    )
                taken[n].append(run)
                log(f"B-ctl stand-in run {i + 1}/{runs} {n} hosts: {run.wall_s:.2f} s, "
                    f"controller CPU {run.cpu_s / n:.4f} s/host")  # fmt: skip
    finally:
        _unpin([])
        standin.stop()
    one = [r.wall_s for r in taken[sizes[0]]]
    return {
        str(n): {
            "wall": summarise([r.wall_s for r in taken[n]]),
            "cpu_per_host": summarise([r.cpu_s / n for r in taken[n]]),
            "rest_cpu_per_host": summarise(rest[n]),
            "ratio_to_first": paired_ratios([r.wall_s for r in taken[n]], one),
            "parallel": min(n, PARALLEL),
            "load_1m": [round(r.load_1m, 2) for r in taken[n]],
        }
        for n in sizes
    }


def pinned_runs(
    bench: BenchHosts,
    patchsets: Path,
    runs: int,
    sizes: list[int],
    split: tuple[set[int], set[int]],
) -> dict:
    """Ours, Ansible (cold) and pyinfra on real sandbox hosts pinned away from the
    controller; each tool's controller CPU per host and wall, interleaved run by run."""
    sizes = [n for n in sizes if n <= len(bench.hosts)]
    if not sizes:
        return {"why": f"no pinned size fits the {len(bench.hosts)} sandbox hosts started"}
    tools = {
        DDTREE_A: lambda n: run_ddtree(
            bench, bench.write_ddtree_inventory(n), patchsets, extra=["--parallel", str(n)]
        ),
    }
    if shutil.which(ansible_playbook()):
        tools[ANSIBLE_COLD] = lambda n: run_ansible(bench, n)
    if pyinfra_bin() is not None:
        tools[PYINFRA] = lambda n: run_pyinfra(bench, n)
    taken: dict[tuple[int, str], list[ToolRun]] = {(n, t): [] for n in sizes for t in tools}
    pids = [pid for pid in (h.sshd_pid() for h in bench.hosts) if pid is not None]
    try:
        _controller_only(split, pids)
        for fn in tools.values():  # untimed: each tool's first start after the pinning
            bench.reset(sizes[0])
            fn(sizes[0])
        for i in range(runs):
            for n in sizes:
                for name, fn in tools.items():
                    bench.reset(n)
                    run = fn(n)
                    taken[(n, name)].append(run)
                    log(f"B-ctl pinned run {i + 1}/{runs} {n} hosts {name}: {run.wall_s:.2f} s, "
                        f"controller CPU {run.cpu_s / n:.4f} s/host")  # fmt: skip
    finally:
        _unpin(pids)
    table: dict = {}
    for (n, name), done in taken.items():
        table.setdefault(str(n), {})[name] = {
            "wall": summarise([r.wall_s for r in done]),
            "cpu_per_host": summarise([r.cpu_s / n for r in done]),
        }
    if ANSIBLE_COLD not in tools:
        table["ansible_why"] = "ansible-playbook not installed (make bench installs it)"
    if pyinfra_bin() is None:
        table["pyinfra_why"] = "pyinfra not installed (bench/.pyinfra-venv: make bench makes it)"
    return table
