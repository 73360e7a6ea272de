"""How noisy is the serving gate on this machine? N pushes of a good patchset over the
DFLASH servers, each with the full gate at the built-in default thresholds, then a
rollback; every check's verdict and the numbers behind it are recorded.

The patchset is ddtree 1.0.0 by default: it installs DDTree's code but no server flags, so
the restarted server serves DFLASH as before and any difference the gate sees is noise (an
A/A comparison through a real push and restart). `--patchset ddtree@1.1.0` measures the
good patch that changes the algorithm (slower than DFLASH on CPU: docs/gate.md).

Usage: ``python bench/gate_noise.py [--runs 10] [--workdir /tmp/ddtree-gate-noise]``
(root: sandbox hosts need it; about 2.5 min a run). Writes bench/gate_noise.json and
prints the table docs/gate.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddtree_deploy.agent.host.wire_results import ReplayStats  # noqa: E402
from ddtree_deploy.gate.compare import noise_band, p95, round_throughputs  # noqa: E402
from ddtree_sandbox.inventory_file import REAL_SERVER_GATE, render_toml  # noqa: E402

# The sandbox's sizing (3 rounds x 8 prompts x 32 tokens, 32+ requests over an 8 s bake),
# with its mode and its CPU allowances for DDTree's speed left out: the built-in defaults.
GATE = {
    key: value
    for key, value in REAL_SERVER_GATE.items()
    if key not in ("mode", "max_tokens_per_s_regression", "max_p95_latency_ratio")
}


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "ddtree_deploy", *args], capture_output=True,
                          text=True, env=env, timeout=1800)  # fmt: skip


def numbers(stdout: str) -> dict[str, dict]:
    """host -> the baseline's and the new server's numbers, and every check's verdict."""
    found: dict[str, dict] = {}
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        data = e.get("data") or {}
        row = found.setdefault(e["host"], {"checks": {}})
        if "measurement" in data and e["event"] in ("ok", "fail"):
            replay = data["measurement"]["replay"]
            stats = ReplayStats.from_dict({**replay, "outputs": []})
            rates = round_throughputs(stats)
            row[e["stage"]] = {
                "tokens_per_s": statistics.median(rates) if rates else None,
                "band": noise_band(rates),
                "p95_s": p95(stats.latencies_s),
                "accept": stats.tokens / stats.verify_ct if stats.verify_ct else 1.0,
            }
        if e["event"] == "info" and data.get("gate"):
            row["checks"][data["gate"]["name"]] = data["gate"]["passed"]
        if e["stage"] == "summary":
            row["outcome"] = data.get("outcome")
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--patchset", default="ddtree@1.0.0")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-gate-noise"))
    args = parser.parse_args()
    from ddtree_sandbox import start_sandbox

    sandbox = start_sandbox(args.workdir / "sandbox", 2, first_octet=None, service="sglang",
                            models=["target", "control"])  # fmt: skip
    try:
        data = tomllib.loads(sandbox.inventory_path.read_text())
        # the prompts of ddtree 1.1.0's [lossless] (1.0.0 has none of its own)
        spec = tomllib.loads((REPO / "patchsets/ddtree/1.1.0/patchset.toml").read_text())
        prompts = args.workdir / "gate-prompts.jsonl"
        prompts.write_text("".join(json.dumps(p) + "\n" for p in spec["lossless"]["prompts"]))
        data.setdefault("defaults", {})["gate"] = {**GATE, "prompts": str(prompts)}
        if args.patchset.startswith("ddtree@1.0."):  # no [serve]: the servers stay DFLASH
            for table in data["hosts"].values():
                table.setdefault("smoke", {})["expected_algorithm"] = "DFLASH"
        inventory = args.workdir / "inventory.toml"
        inventory.write_text(render_toml(data))
        common = ["-i", str(inventory), "--patchsets-dir", str(REPO / "patchsets")]
        runs = []
        for number in range(args.runs):
            load = os.getloadavg()[0]
            started = time.monotonic()
            pushed = cli("push", "--all", "-p", args.patchset, "--gate", "full", "--json",
                         *common)  # fmt: skip
            wall = time.monotonic() - started
            back = cli("rollback", "--all", "-i", str(inventory))
            if pushed.returncode != 0:  # keep what the summary said
                (args.workdir / f"run-{number + 1}.err").write_text(pushed.stderr)
            run = {
                "run": number + 1,
                "exit": pushed.returncode,
                "rollback_exit": back.returncode,
                "load_1m": load,
                "wall_s": round(wall, 1),
                "hosts": numbers(pushed.stdout),
            }
            runs.append(run)
            print(json.dumps(run), flush=True)
        out = REPO / "bench" / "gate_noise.json"
        record = {"patchset": args.patchset, "gate": GATE, "runs": runs}
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {out}", file=sys.stderr)
        return 0 if all(r["exit"] == 0 for r in runs) else 1
    finally:
        sandbox.stop()


if __name__ == "__main__":
    sys.exit(main())
