"""Scenario V: time to a verified server, the number a GPU operator feels (issue 46 item 4).

On the sandbox's REAL sglang 0.5.13.post1 servers (tiny CPU models serving DFLASH, as in
tests/serving), each run pushes ddtree 1.1.0 with every gate: the serving gate's baseline,
install, compile, the smoke suites (integrity, compile, imports, ddtree, gpu), the lossless
references from the old server, restart, health, the `server` suite (lossless) and the
serving gate's canary (`--gate full`: replay, load, bake), with `--json`; then rolls back,
so the next run starts from DFLASH again. bench/verified_breakdown.py turns each run's
events into a per-stage breakdown; the result is the median and spread per stage over the
runs, with what serves meanwhile (old server, nothing, new server).

With `serial_too` (`--v-serial`) each run also pushes by the path before the reference
was recorded beside the smoke suites (BENCH ONLY: DDTREE_DEPLOY_BENCH_REFERENCE_APART=1 makes
the push send it as a request of its own after them), the two back to back in alternating
order, so out["V"]["cut"] holds medians of paired (interleaved) differences.

Its own sandbox (not the bench hosts of scenarios A-D): real servers take minutes to start
and every push restarts one. Expect ≈ 20 s to start one host once the sandbox's base env and
tiny models are cached (the first time builds them: minutes), then ≈ 1.5 min per run on a quiet
2-core machine (the push ≈ 70 s, its rollback ≈ 15 s): ≈ 5 min for the default 3 runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, log
from verified_breakdown import (
    paired_cut,
    phase_totals,
    run_breakdown,
    suite_seconds,
    summarise_breakdowns,
    summarise_suites,
)

PATCHSET = "ddtree@1.1.0"
PATCHSETS = REPO / "patchsets"  # read only: ddtree 1.1.0 and the shared file store
GATE_MODE = "full"


SERIAL_ENV = "DDTREE_DEPLOY_BENCH_REFERENCE_APART"  # cli/push.py: bench only
BESIDE = ("reference",)  # since the cut it runs inside smoke's time


def _cli(
    *args: str, timeout_s: float = 1800, env: dict[str, str] | None = None
) -> tuple[float, subprocess.CompletedProcess]:
    """One fresh `python -m ddtree_deploy ...` process: (wall seconds, the finished process)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ddtree_deploy", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    return time.monotonic() - started, done


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def one_run(
    inventory: Path, patchsets: Path, hosts: list[str], logs: Path, i: int, serial: bool = False
) -> dict:
    """One timed push with every gate (by the serial path before the cut when `serial`),
    its rollback (untimed), and each host's breakdown."""
    env, tag = ({SERIAL_ENV: "1"}, "-serial") if serial else ({SERIAL_ENV: "0"}, "")
    wall_s, done = _cli(
        "push", "-i", str(inventory), "--patchsets-dir", str(patchsets), "--all", "--yes",
        "-p", PATCHSET, "--gate", GATE_MODE, "--json", env=env,
    )  # fmt: skip
    log_text = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    (logs / f"push-{i:02d}{tag}.log").write_text(log_text)
    events = _events(done.stdout)
    back_s, undone = _cli("rollback", "-i", str(inventory), "--all", "--json")
    (logs / f"rollback-{i:02d}{tag}.log").write_text(f"exit {undone.returncode}\n{undone.stderr}")
    if done.returncode != 0:
        raise RuntimeError(f"V push {i} exited {done.returncode}:\n{done.stderr[-3000:]}")
    if undone.returncode != 0:
        raise RuntimeError(f"V rollback {i} exited {undone.returncode}:\n{undone.stderr[-3000:]}")
    return {
        "wall_s": wall_s,
        "rollback_s": back_s,
        "load_1m": os.getloadavg()[0],
        "hosts": {h: run_breakdown(events, h, wall_s, () if serial else BESIDE) for h in hosts},
        "suites": {h: suite_seconds(events, h) for h in hosts},
    }


class Side:
    """The runs of one path (the serial path before the cut, or the push as it is now)."""

    def __init__(self, serial: bool) -> None:
        self.serial = serial
        self.breakdowns: list[dict[str, float]] = []
        self.suites: list[dict[str, float]] = []
        self.samples: list[dict] = []

    def add(self, run: dict) -> None:
        self.breakdowns += list(run["hosts"].values())
        self.suites += list(run["suites"].values())
        self.samples.append({k: run[k] for k in ("wall_s", "rollback_s", "load_1m")})

    def summary(self) -> dict:
        """rows, phases, suites and runs (out["V"]'s keys) over this side's runs."""
        rows = summarise_breakdowns(self.breakdowns)
        overlapped = () if self.serial else BESIDE
        return {
            "rows": rows,
            "phases": phase_totals(rows, overlapped),
            "suites": summarise_suites(self.suites),
            "runs": self.samples,
        }


def scenario_verified(
    workdir: Path, hosts: int, runs: int, out: dict, serial_too: bool = False
) -> None:
    """Start `hosts` real sglang hosts, time `runs` pushes with every gate (each rolled back
    after), write out["V"]: the per-stage rows over every run and host, the phase totals,
    and the setup (sandbox start, sglang version, gate mode, load). With `serial_too`, each
    run pushes by the serial path too (alternating which goes first): out["V"]["serial"]
    holds its rows and out["V"]["cut"] the medians of the paired savings per stage."""
    from ddtree_sandbox import ensure_base_env, start_sandbox

    if workdir.exists():
        shutil.rmtree(workdir)
    logs = workdir / "logs"
    logs.mkdir(parents=True)
    started = time.monotonic()
    base_env = ensure_base_env()
    sandbox = start_sandbox(
        workdir / "sandbox", hosts, first_octet=None, base_env=base_env,
        service="sglang", models=["target"] * hosts,
    )  # fmt: skip
    start_s = time.monotonic() - started
    names = [h.name for h in sandbox.hosts]
    log(f"V: {hosts} real sglang host(s) up in {start_s:.0f} s")
    now, before = Side(serial=False), Side(serial=True)
    try:
        for i in range(runs):
            order = [before, now] if i % 2 == 0 else [now, before]
            for side in order if serial_too else [now]:
                run = one_run(sandbox.inventory_path, PATCHSETS, names, logs, i + 1, side.serial)
                side.add(run)
                log(f"V run {i + 1}/{runs}{' serial' if side.serial else ''}: push "
                    f"{run['wall_s']:.1f} s, rollback {run['rollback_s']:.1f} s, "
                    f"load {run['load_1m']:.1f}")  # fmt: skip
    finally:
        sandbox.stop()
    out["V"] = {
        **now.summary(),
        "setup": {
            "hosts": hosts,
            "runs": runs,
            "sglang": base_env.sglang_version,
            "patchset": PATCHSET,
            "gate": GATE_MODE,
            "sandbox_start_s": round(start_s, 1),
            "logs": str(logs),
            "serial_too": serial_too,
        },
    }
    if serial_too:
        pairs = list(zip(before.breakdowns, now.breakdowns, strict=True))
        out["V"]["serial"] = before.summary()
        out["V"]["cut"] = paired_cut(pairs, BESIDE)
