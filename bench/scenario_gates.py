"""Scenarios A+ (the push with the `imports` smoke vs that suite alone over plain ssh) and I
(the `imports` suite vs one fresh process importing every patched module), interleaved.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from harness import REPO, BenchHosts, log
from scenario_a import check_deployed
from summary import paired_ratios, summarise
from tools import run_ddtree, run_smoke_floor, run_ssh

sys.path.insert(0, str(REPO))
from ddtree_deploy.inventory import load_inventory  # noqa: E402
from ddtree_deploy.patchset import load_patchset  # noqa: E402
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources  # noqa: E402
from ddtree_deploy.stages import op_builders as ops  # noqa: E402
from ddtree_deploy.stages.prepared import prepare_patchset  # noqa: E402


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
        script = plant_suite(bench, count, smoke.args)
        floor = run_smoke_floor(bench, count, suite_input, script=script)
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


def plant_suite(bench: BenchHosts, count: int, smoke_args: dict) -> str:
    """Write the smoke op's suite scripts and support modules into state_dir/bench-smoke on
    the first `count` hosts (the agent runs them from a private dir it removes afterwards);
    the host-side path of the first suite's script."""
    for host in bench.hosts[:count]:
        suite_dir = host.state_dir_on_disk / "bench-smoke"
        suite_dir.mkdir(parents=True, exist_ok=True)
        for suite in smoke_args["suites"]:
            (suite_dir / f"{suite['name']}.py").write_text(suite["source"])
        for name, source in smoke_args["support"].items():
            (suite_dir / name).write_text(source)
    return f"{bench.hosts[0].state_dir}/bench-smoke/{smoke_args['suites'][0]['name']}.py"


def scenario_i(bench: BenchHosts, dirs: dict[str, Path], runs: int, out: dict) -> None:
    """The `imports` suite vs its floor (ONE fresh process importing every patched module
    once) on one host with the patched files in place, interleaved, over plain ssh each."""
    host = bench.hosts[0]
    bench.reset(1)
    for rel, data in bench.results.items():  # the patched files, as a push leaves them
        (host.site_packages_on_disk / rel).write_bytes(data)
    prepared = prepare_patchset(load_patchset(dirs["imports"] / "ddtree" / "1.0.0"))
    inventory_host = load_inventory(bench.write_ddtree_inventory(1)).hosts[host.name]
    sources = load_smoke_sources(["imports"], default_smoke_dir())
    smoke = ops.smoke_op(inventory_host, bench.site_packages, prepared, sources, 600, ["imports"])
    script = plant_suite(bench, 1, smoke.args)
    suite_input = smoke.args["suites"][0]["input"]
    imports = "; ".join(f"import {m}" for m in prepared.modules)
    floor_cmd = f"{bench.python} -c {shlex.quote(imports)}"
    suites, floors, loads = [], [], []
    try:
        for i in range(runs):
            floor = run_ssh(bench, 0, floor_cmd)
            suite = run_smoke_floor(bench, 1, suite_input, script=script)
            floors.append(floor.wall_s)
            suites.append(suite.wall_s)
            loads += [floor.load_1m, suite.load_1m]
            log(f"I run {i + 1}/{runs}: floor {floor.wall_s:.2f} s, suite {suite.wall_s:.2f} s")
    finally:
        bench.reset(1)
    out["I"] = {
        "modules": prepared.modules,
        "floor": summarise(floors),
        "suite": summarise(suites),
        "ratio": paired_ratios(suites, floors),
        "load_1m": [round(x, 2) for x in loads],
    }
