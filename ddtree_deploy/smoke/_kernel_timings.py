"""Timings of SGLang 0.5.23's tree kernels beside DDTree's own code, one record per shape.

- `uno_vs_ours`: build_uno_tree_proposal (batch 1) vs our build_ddtree_tree_from_logits per
  call at L=15 (UNO caps Q <= 128 and Q*K <= 2048, so its K is the largest allowed and a
  budget UNO refuses is reported as refused); `same_tree` says whether both built one tree,
  and the record is ok only when that is what the rank rule predicts (equal exactly when our
  tree uses no sibling rank >= K, see _kernel_checks.check_tree_equality).
- `masked_verify`: extend_attention_fwd with a tree mask, batch 8, Q = budget + 1.

Run by the `gpu` smoke suite and bench/gpu_check.py (`make gpu-check`); torch, triton and an
installed sglang 0.5.23 in the python that runs them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import _tree_ops as tree_ops
import torch
from _sglang_kernels import Kernels
from _uno_mapping import sibling_ranks


@dataclass(frozen=True)
class TimingShapes:
    """What to time: builders at `vocab` for `builder_budgets`; verify attention with
    `heads` x `head_dim`, `prefix` tokens per request, for `verify_budgets`; `reps` calls."""

    vocab: int
    builder_budgets: tuple[int, ...]
    heads: int
    head_dim: int
    prefix: int
    verify_budgets: tuple[int, ...]
    reps: int


def time_kernels(
    kernels: Kernels, oracle: ModuleType, device: str, shapes: TimingShapes
) -> list[dict]:
    """Return the `uno_vs_ours` then the `masked_verify` records for `shapes`."""
    records = time_builders(
        kernels, oracle, device, shapes.vocab, shapes.builder_budgets, shapes.reps
    )
    return records + time_masked_verify(
        kernels,
        device,
        shapes.heads,
        shapes.head_dim,
        shapes.prefix,
        shapes.verify_budgets,
        shapes.reps,
    )


def median_s(run: Callable[[], object], reps: int, sync: Callable[[], object]) -> float:
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


def _sync_for(device: str) -> Callable[[], object]:
    """Return what waits for `device`'s queued work (nothing on the CPU)."""
    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def time_builders(
    kernels: Kernels, oracle: ModuleType, device: str, vocab: int, budgets, reps: int
) -> list[dict]:
    """Return one record per budget: UNO's and our builder's median seconds per call."""
    sync = _sync_for(device)
    gen = torch.Generator().manual_seed(30)
    logits = (torch.randn(1, 15, vocab, generator=gen) * 3.0).to(device)
    roots = torch.zeros(1, dtype=torch.long, device=device)
    records = []
    for budget in budgets:
        top_k = min(budget, 2048 // (budget + 1), vocab)
        rec: dict = {"check": "uno_vs_ours", "budget": budget, "vocab": vocab, "depths": 15}
        rec["ok"] = True  # a budget UNO refuses is reported, not failed
        rec["ours_s"] = median_s(
            functools.partial(oracle.build_ddtree_tree_from_logits, logits[0], budget), reps, sync
        )
        try:
            uno = functools.partial(tree_ops.build_uno, kernels, roots, logits, budget, top_k)
            rec["uno_s"], rec["uno_candidate_top_k"] = median_s(uno, reps, sync), top_k
            ours = oracle.build_ddtree_tree_from_logits(logits[0].cpu(), budget)
            rec["same_tree"] = uno()[1][0].parents == ours.parents
            rec["ours_max_rank"] = max(sibling_ranks(ours.parents), default=0)
            rec["ok"] = rec["same_tree"] == (rec["ours_max_rank"] < top_k)
        except ValueError as error:
            rec["uno_refused"] = str(error)
        records.append(rec)
    return records


def time_masked_verify(
    kernels: Kernels, device: str, heads: int, dim: int, prefix: int, budgets, reps: int
) -> list[dict]:
    """Return one record per budget: extend_attention_fwd with a tree mask, median seconds
    (bf16 on CUDA, fp32 on the CPU)."""
    sync = _sync_for(device)
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
                "seconds": median_s(run, reps, sync),
            }
        )
    return records
