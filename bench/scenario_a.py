"""Scenario A: ddtree-deploy against Ansible (cold, warm), the floor, bare ssh, pyinfra and
naive Fabric on 4 hosts at each RTT, interleaved run by run; plus what every host scenario
shares (the patchset variants, the deployed-files check, run summaries).
"""

from __future__ import annotations

import statistics
import sys
import urllib.request
from pathlib import Path

from floor import BARE_SSH, FLOOR, run_bare_ssh, run_floor
from harness import BROKEN_MARKER, REPO, BenchHosts, log
from pyinfra_peer import PYINFRA, pyinfra_bin, run_pyinfra
from summary import ANSIBLE_COLD, ANSIBLE_WARM, DDTREE_A, paired_ratios, summarise
from tools import WARM_CONTROL_DIR, ToolRun, close_masters, run_ansible, run_ddtree, run_fabric

sys.path.insert(0, str(REPO))
from tests.support import make_patchset, utils_file  # noqa: E402 - the repo's patchset variant builder

SCENARIO_A_HOSTS = 4


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


def scenario_a(
    bench: BenchHosts,
    dirs: dict[str, Path],
    runs: int,
    rtts_ms: list[float],
    main_rtt_s: float,
    out: dict,
) -> None:
    """At each RTT: ddtree-deploy and Ansible (cold, warm) interleaved run by run; at the
    main 25 ms also the integrity+compile variant and naive Fabric. The proxies get
    ``main_rtt_s`` back at the end."""
    count = SCENARIO_A_HOSTS
    inventory = bench.write_ddtree_inventory(count)
    out["A"], out["A_ratios"], out["round_trips"] = {}, {}, {}
    for rtt_ms in rtts_ms:
        key = f"{rtt_ms:g}"
        bench.set_rtt(rtt_ms / 1000)
        tools = {
            DDTREE_A: lambda: run_ddtree(bench, inventory, dirs["none"]),
            ANSIBLE_COLD: lambda: run_ansible(bench, count),
            ANSIBLE_WARM: lambda: run_ansible(bench, count, warm=True),
            FLOOR: lambda: run_floor(bench, count),
            BARE_SSH: lambda: run_bare_ssh(bench, count),
        }
        if pyinfra_bin() is not None:
            tools[PYINFRA] = lambda: run_pyinfra(bench, count)
        if key == "25":
            tools["ddtree-deploy (suites integrity+compile)"] = lambda: run_ddtree(
                bench, inventory, dirs["fast"]
            )
            tools["Fabric, naive"] = lambda: run_fabric(bench, count)
        taken: dict[str, list[ToolRun]] = {name: [] for name in tools}
        close_masters(WARM_CONTROL_DIR)  # masters of another RTT would keep its delay
        run_ansible(bench, count, warm=True)  # bring the warm masters up (untimed)
        # Ours gets its untimed run too: the first push after the hosts start pays their cold
        # caches (page cache, the agent's compiled bundle), 0.9 s more than the next ones
        # at 0 ms (bench/NOTES.md, session 11).
        bench.reset(count)
        run_ddtree(bench, inventory, dirs["none"])
        if PYINFRA in tools:  # and pyinfra: its venv's first start reads it from disk
            bench.reset(count)
            run_pyinfra(bench, count)
        for i in range(runs):
            for name, fn in tools.items():
                bench.reset(count)
                result: ToolRun = fn()
                if name != BARE_SSH:  # it deploys nothing
                    check_deployed(bench, count)
                taken[name].append(result)
                log(f"A {key} ms run {i + 1}/{runs} {name}: {result.wall_s:.2f} s "
                    f"(CPU {result.cpu_s:.2f} s, load {result.load_1m:.1f})")  # fmt: skip
        out["A"][key] = {name: summarise_runs(r) for name, r in taken.items()}
        ours = [r.wall_s for r in taken[DDTREE_A]]
        out["A_ratios"][key] = {
            "cold": paired_ratios([r.wall_s for r in taken[ANSIBLE_COLD]], ours),
            "warm": paired_ratios([r.wall_s for r in taken[ANSIBLE_WARM]], ours),
        }
        out.setdefault("A_floor", {})[key] = floor_ratios(taken)
        if key == "25":
            out["round_trips"] = {
                name: per_host_counts([r.stats for r in runs_]) for name, runs_ in taken.items()
                if runs_[0].stats
            }  # fmt: skip
    bench.set_rtt(main_rtt_s)


def floor_ratios(taken: dict[str, list[ToolRun]]) -> dict:
    """Ours / the floor and ours / bare ssh, pyinfra / ours (paired per run), or why not."""
    ours = [r.wall_s for r in taken[DDTREE_A]]
    found = {
        "ours_over_floor": paired_ratios(ours, [r.wall_s for r in taken[FLOOR]]),
        "ours_over_bare_ssh": paired_ratios(ours, [r.wall_s for r in taken[BARE_SSH]]),
    }
    if PYINFRA in taken:
        found["pyinfra_over_ours"] = paired_ratios([r.wall_s for r in taken[PYINFRA]], ours)
    else:
        found["pyinfra_why"] = "pyinfra not installed (bench/.pyinfra-venv: make bench makes it)"
    return found


def summarise_runs(runs: list[ToolRun]) -> dict:
    """Wall medians with min–max, plus CPU seconds and the load average of each run."""
    return {
        **summarise([r.wall_s for r in runs]),
        "cpu_s": summarise([r.cpu_s for r in runs]),
        "load_1m": [round(r.load_1m, 2) for r in runs],
    }


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
