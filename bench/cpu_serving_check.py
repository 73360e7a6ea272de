"""Check that a real sglang 0.5.13.post1 decodes losslessly on CPU with DFLASH and DDTREE.

Builds two throwaway host-like venvs under WORKDIR (a plain venv + the base env's .pth + a
copy of the pristine sglang + the cpu_adapt fixture, as ``_prepare_hostdir`` lays them out;
the second one with patchset ddtree 1.1.0 applied), then, one server at a time, serves the
sandbox's tiny target with ``python -m sglang.launch_server``: no speculation, DFLASH, DDTREE
at each budget, the zero-head control target, and DDTREE with the tree mask ignored (negative
control). Each server gets the same prompts (by ``input_ids``, greedy, ``ignore_eos``) one at
a time and all at once; outputs are compared token by token with the plain server's.

    python bench/cpu_serving_check.py --workdir /tmp/cpu-check [--budgets 4 16] [--json-out F]

Prints one table row per server on stdout; exits 1 when a run that must be lossless is not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "sandbox")]  # the checkout's product and test sandbox

from ddtree_deploy.patchset.load import load_patchset  # noqa: E402
from ddtree_deploy.patchset.materialize import materialize  # noqa: E402
from ddtree_sandbox.baseenv import BaseEnv, ensure_base_env  # noqa: E402
from ddtree_sandbox.cpu_adapt import IGNORE_TREE_MASK_FLAG  # noqa: E402
from ddtree_sandbox.hosts import make_host_venv  # noqa: E402
from ddtree_sandbox.models import ModelSet, ensure_models  # noqa: E402
from ddtree_sandbox.serving import (  # noqa: E402
    SERVE_ENV,
    base_launch_args,
    ddtree_args,
    dflash_args,
)

PATCHSET_DIR = REPO / "patchsets" / "ddtree" / "1.1.0"
NUM_SPECIALS = 4  # make_models puts unk, mask, pad, eos after the plain words


@dataclass(frozen=True)
class ServerRun:
    """One server to start: its name, venv python, model, extra flags and env."""

    name: str
    python: Path
    model: str
    extra_args: list[str]
    extra_env: dict[str, str] = field(default_factory=dict)
    must_match: str = "plain"  # "plain", "zeros" or "" (negative control: expected to differ)


@dataclass
class RunResult:
    name: str
    start_s: float
    rss_mb: float
    outputs_seq: list[list[int]]
    outputs_conc: list[list[int]]
    completion_tokens: int
    verify_ct: int
    latency_s: list[float]
    differ_seq: int = 0
    first_diff: list[int] = field(default_factory=list)
    identical_conc: bool = True
    lossless: bool | None = None

    @property
    def accept_length(self) -> float | None:
        return self.completion_tokens / self.verify_ct if self.verify_ct else None


def build_host_venv(workdir: Path, name: str, base_env: BaseEnv, with_ddtree: bool) -> Path:
    """Return the python of a fresh host-like venv under ``workdir/name``."""
    venv = workdir / name
    shutil.rmtree(venv, ignore_errors=True)
    site_packages = make_host_venv(venv, base_env)
    if with_ddtree:
        wheel = next(base_env.wheelhouse.glob(f"sglang-{base_env.sglang_version}-*.whl"))
        for item in materialize(load_patchset(PATCHSET_DIR), wheel):
            (site_packages / item.entry.path).write_bytes(item.result)
    return venv / "bin" / "python"


def make_prompts(count: int, vocab_size: int, seed: int) -> list[list[int]]:
    """Return ``count`` random prompts of 8-24 plain-word ids."""
    rng = random.Random(seed)
    words = vocab_size - NUM_SPECIALS
    return [[rng.randrange(words) for _ in range(rng.randint(8, 24))] for _ in range(count)]


def free_port() -> int:
    """Return a free port in 31000-38999 (sglang derives others, e.g. gRPC at port + 10000)."""
    for port in random.Random().sample(range(31000, 39000), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 31000-38999")


def post_json(url: str, payload: dict, timeout_s: float = 120.0) -> dict:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def wait_healthy(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/health_generate", timeout=10
            ) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"server not healthy after {timeout_s} s")


def tree_rss_mb(pid: int) -> float:
    """Return the summed RSS (MB) of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total_kb, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            pass
    return total_kb / 1024


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL it after 30 s."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            time.sleep(0.5)  # let the scheduler children go too
            return
        except subprocess.TimeoutExpired:
            continue


def generate(port: int, prompt: list[int], max_new_tokens: int) -> dict:
    payload = {
        "input_ids": prompt,
        "sampling_params": {
            "temperature": 0,
            "max_new_tokens": max_new_tokens,
            "ignore_eos": True,
        },
    }
    return post_json(f"http://127.0.0.1:{port}/generate", payload)


def serve_and_measure(
    run: ServerRun, models: ModelSet, prompts: list[list[int]], args: argparse.Namespace
) -> RunResult:
    """Start one server, send the prompts sequentially then concurrently, stop it."""
    port = free_port()
    tmpdir = args.workdir / f"tmp-{run.name}"
    shutil.rmtree(tmpdir, ignore_errors=True)
    tmpdir.mkdir(parents=True)
    env = {**os.environ, **SERVE_ENV, **run.extra_env, "TMPDIR": str(tmpdir)}
    cmd = [str(run.python), "-m", "sglang.launch_server"]
    cmd += base_launch_args(models.path(run.model), "127.0.0.1", port) + run.extra_args
    log = open(args.workdir / f"{run.name}.log", "w")
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_healthy(port, proc, args.start_timeout_s)
        start_s = time.monotonic() - started
        sequential = [generate(port, p, args.max_new_tokens) for p in prompts]
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            concurrent = list(pool.map(lambda p: generate(port, p, args.max_new_tokens), prompts))
        rss_mb = tree_rss_mb(proc.pid)
    finally:
        stop_server(proc)
        log.close()
    meta = [r["meta_info"] for r in sequential]
    return RunResult(
        name=run.name,
        start_s=start_s,
        rss_mb=rss_mb,
        outputs_seq=[r["output_ids"] for r in sequential],
        outputs_conc=[r["output_ids"] for r in concurrent],
        completion_tokens=sum(m["completion_tokens"] for m in meta),
        verify_ct=sum(m.get("spec_verify_ct", 0) for m in meta),
        latency_s=[m["e2e_latency"] for m in meta],
    )


def compare(result: RunResult, reference: list[list[int]]) -> None:
    """Fill in how many prompts differ from ``reference`` and at which token."""
    result.first_diff = []
    for got, want in zip(result.outputs_seq, reference, strict=True):
        index = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
        if index is None and len(got) != len(want):
            index = min(len(got), len(want))
        if index is not None:
            result.first_diff.append(index)
    result.differ_seq = len(result.first_diff)
    result.identical_conc = result.outputs_conc == reference


def plan_runs(
    python_a: Path, python_b: Path, models: ModelSet, args: argparse.Namespace
) -> list[ServerRun]:
    block = models.block_size
    runs = [
        ServerRun("plain", python_a, "target", []),
        ServerRun("dflash", python_a, "target", dflash_args(models.draft, block)),
    ]
    for budget in args.budgets:
        runs.append(ServerRun(f"ddtree-b{budget}", python_b, "target",
                              ddtree_args(models.draft, block, budget)))  # fmt: skip
    runs.append(ServerRun("control-dflash", python_a, "control",
                          dflash_args(models.draft, block), must_match="zeros"))  # fmt: skip
    first = args.budgets[0]
    runs.append(ServerRun(f"control-ddtree-b{first}", python_b, "control",
                          ddtree_args(models.draft, block, first), must_match="zeros"))  # fmt: skip
    if not args.skip_negative:
        for budget in args.budgets:
            runs.append(ServerRun(f"nomask-ddtree-b{budget}", python_b, "target",
                                  ddtree_args(models.draft, block, budget),
                                  {IGNORE_TREE_MASK_FLAG: "1"}, must_match=""))  # fmt: skip
    return runs


def print_table(results: list[RunResult], prompts: int) -> None:
    header = (f"{'server':<20} {'start_s':>7} {'rss_mb':>7} {'differ':>7} {'conc_same':>9} "
              f"{'accept':>7} {'verify_ct':>9} {'ms/64tok':>8}  first differing token")  # fmt: skip
    print(header)
    for r in results:
        accept = f"{r.accept_length:.3f}" if r.accept_length else "-"
        latency_ms = 1000 * sum(r.latency_s) / len(r.latency_s)
        print(f"{r.name:<20} {r.start_s:>7.1f} {r.rss_mb:>7.0f} {r.differ_seq:>3}/{prompts:<3} "
              f"{str(r.identical_conc):>9} {accept:>7} {r.verify_ct:>9} {latency_ms:>8.0f}  "
              f"{r.first_diff or '-'}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-cpu-serving-check"))
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--budgets", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=None, help="model recipe override")
    parser.add_argument("--init-std", type=float, default=None, help="model recipe override")
    parser.add_argument("--skip-negative", action="store_true")
    parser.add_argument("--only", nargs="*", default=None, help="run only these server names")
    parser.add_argument("--start-timeout-s", type=float, default=180.0)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    base_env = ensure_base_env("0.5.13.post1")
    recipe = {k: v for k, v in (("vocab_size", args.vocab_size), ("init_std", args.init_std))
              if v is not None}  # fmt: skip
    models = ensure_models(base_env, recipe)
    python_a = build_host_venv(args.workdir, "venv-plain", base_env, with_ddtree=False)
    python_b = build_host_venv(args.workdir, "venv-ddtree-1.1.0", base_env, with_ddtree=True)
    prompts = make_prompts(args.prompts, models.vocab_size, args.seed)
    runs = plan_runs(python_a, python_b, models, args)
    if args.only:
        runs = [run for run in runs if run.name in args.only or run.name == "plain"]
    results, reference, ok = [], None, True
    for run in runs:
        result = serve_and_measure(run, models, prompts, args)
        if run.name == "plain":
            reference = result.outputs_seq
        want = (
            [[0] * args.max_new_tokens] * len(prompts) if run.must_match == "zeros" else reference
        )
        compare(result, want)
        if run.must_match:
            result.lossless = result.differ_seq == 0 and result.identical_conc
            ok &= result.lossless
        results.append(result)
        print(f"# {run.name}: done ({result.start_s:.1f} s start)", file=sys.stderr)
    print(f"# models {models.root} (vocab {models.vocab_size}), {len(prompts)} prompts x "
          f"{args.max_new_tokens} tokens, greedy, by input_ids")  # fmt: skip
    print_table(results, len(prompts))
    if args.json_out:
        rows = [{**asdict(r), "accept_length": r.accept_length} for r in results]
        payload = {"models": str(models.root), "prompts": prompts, "results": rows}
        args.json_out.write_text(json.dumps(payload, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
