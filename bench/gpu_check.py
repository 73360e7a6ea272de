"""GPU check of SGLang's own tree kernels against DDTree (`make gpu-check`), plus timings.

Runs tests/kernels/kernel_checks.py's checks on CUDA (real Triton, real flashinfer top-k,
and sglang's JIT CUDA build_tree kernel beside the Triton one), the full shapes included
(V=151936), then times:

- `uno_vs_ours`: build_uno_tree_proposal (batch 1) vs our build_ddtree_tree_from_logits per
  call at V=151936, L=15, budgets 16/64/256/1024 (UNO caps Q <= 128 and Q*K <= 2048, so
  its K is the largest allowed and budgets 256/1024 are reported as refused);
- `masked_verify`: extend_attention_fwd with a tree mask, batch 8, Q = budget + 1, prefix
  1024, 32 heads of 128, bf16.

One JSON line per check or timing on stdout. Needs torch, triton and sglang 0.5.23 in the
python that runs it (no network). Without CUDA it says so and exits 2, unless --self-test:
then it runs everything on the CPU under TRITON_INTERPRET=1 at tiny timing shapes (what
tests/kernels/test_kernels.py runs so this script cannot rot).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORACLE_VERSION = "1.1.9"
ORACLE_PATH = "sglang/srt/speculative/ddtree_utils.py"


def oracle_file() -> Path:
    """Return where the patchset store keeps ddtree 1.1.9's ddtree_utils.py."""
    version_dir = REPO / "patchsets" / "ddtree" / ORACLE_VERSION
    lock = json.loads((version_dir / "patchset.lock.json").read_text())
    entry = lock["files"][ORACLE_PATH]
    own = version_dir / entry["source"]
    if own.is_file():
        return own
    return REPO / "patchsets" / "ddtree" / "shared" / "sha256" / entry["result_sha256"]


def _median_s(run, reps: int, sync) -> float:
    """Return the median wall time of `reps` calls of run() (after one warm-up), seconds."""
    run()
    sync()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def time_builders(kernels, oracle, device: str, vocab: int, budgets, reps: int) -> list[dict]:
    """Return one record per budget: UNO's and our builder's median seconds per call."""
    import torch
    import tree_ops

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(30)
    logits = (torch.randn(1, 15, vocab, generator=gen) * 3.0).to(device)
    roots = torch.zeros(1, dtype=torch.long, device=device)
    records = []
    for budget in budgets:
        top_k = min(budget, 2048 // (budget + 1), vocab)
        rec = {"check": "uno_vs_ours", "budget": budget, "vocab": vocab, "depths": 15, "ok": True}
        rec["ours_s"] = _median_s(
            functools.partial(oracle.build_ddtree_tree_from_logits, logits[0], budget), reps, sync
        )
        try:
            uno = functools.partial(tree_ops.build_uno, kernels, roots, logits, budget, top_k)
            rec["uno_s"], rec["uno_candidate_top_k"] = _median_s(uno, reps, sync), top_k
            ours = oracle.build_ddtree_tree_from_logits(logits[0].cpu(), budget)
            rec["same_tree"] = (
                tree_ops.build_uno(kernels, roots, logits, budget, top_k)[1][0].parents
                == ours.parents
            )
        except ValueError as error:
            rec["uno_refused"] = str(error)
        records.append(rec)
    return records


def time_masked_verify(
    kernels, device: str, heads: int, dim: int, prefix: int, budgets, reps: int
) -> list[dict]:
    """Return one record per budget: extend_attention_fwd with a tree mask, median seconds."""
    import torch
    import tree_ops

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    batch, records = 8, []
    for budget in budgets:
        width = budget + 1
        k_buffer = torch.randn(batch * prefix, heads, dim, device=device, dtype=dtype)
        v_buffer = torch.randn_like(k_buffer)
        slots = [torch.arange(b * prefix, (b + 1) * prefix, device=device) for b in range(batch)]
        q, k, v = (
            torch.randn(batch * width, heads, dim, device=device, dtype=dtype) for _ in range(3)
        )
        mask = torch.ones(batch * width * (prefix + width), dtype=torch.bool, device=device)
        run = functools.partial(
            tree_ops.extend_attention,
            kernels,
            q,
            k,
            v,
            k_buffer,
            v_buffer,
            slots,
            [width] * batch,
            mask,
        )
        records.append(
            {
                "check": "masked_verify",
                "ok": True,
                "budget": budget,
                "batch": batch,
                "prefix": prefix,
                "heads": heads,
                "head_dim": dim,
                "dtype": str(dtype),
                "seconds": _median_s(run, reps, sync),
            }
        )
    return records


def main(argv: list[str] | None = None) -> int:
    """Run the checks and timings; exit 0 when every check is ok, 1 if not, 2 without CUDA."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--self-test", action="store_true", help="CPU, TRITON_INTERPRET=1, tiny shapes"
    )
    args = parser.parse_args(argv)
    if args.self_test:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    if not args.self_test and not torch.cuda.is_available():
        print(
            "gpu-check needs CUDA (torch.cuda.is_available() is False); "
            "--self-test runs it on the CPU under TRITON_INTERPRET=1",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(REPO / "tests" / "kernels"))
    import kernel_checks
    from sglang_kernels import load_kernels

    device = "cpu" if args.self_test else "cuda"
    flags = ["--oracle", str(oracle_file()), "--device", device]
    failed = kernel_checks.main(flags if args.self_test else [*flags, "--full"])
    kernels = load_kernels()
    oracle = kernel_checks.load_oracle(oracle_file())
    if args.self_test:
        records = time_builders(kernels, oracle, device, 2000, (16,), 1)
        records += time_masked_verify(kernels, device, 2, 16, 32, (16,), 1)
    else:
        records = time_builders(kernels, oracle, device, 151_936, (16, 64, 256, 1024), 20)
        records += time_masked_verify(kernels, device, 32, 128, 1024, (16, 64, 127), 20)
    for rec in records:
        rec["device"] = (
            torch.cuda.get_device_name() if device == "cuda" else "cpu (TRITON_INTERPRET=1)"
        )
        print(json.dumps(rec), flush=True)
    return 1 if failed or not all(r.get("same_tree", True) for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
