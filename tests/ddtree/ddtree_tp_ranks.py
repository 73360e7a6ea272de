"""Run ddtree 2.2.0's sharded tree builder on N gloo ranks and compare it with one rank.

Standalone (no ddtree_deploy import): run by tests/ddtree/test_ddtree_tp.py with the sandbox
base env's python (torch CPU), ``PYTHONPATH`` holding a folder with ``sglang/srt/speculative/``
{``ddtree_utils.py``, ``ddtree_tp.py``}. Every rank builds the same cases' full logits from a
seed, keeps its vocab shard in sglang 0.5.23's layout (padding columns filled with 1e30, so a
picked padding column shows), builds its tree with ``build_ddtree_tree_sharded`` over the gloo
group; rank 0 compares each rank's tree with

- ``one_rank``: the same module on the whole vocabulary, no collective: every field, bit for
  bit (tokens, depths, parents, child maps, visibility mask, prefix log-probs);
- ``builder``: ``build_ddtree_tree_from_logits`` (the single-rank builder): every field but the
  prefix log-probs exactly, those within ``--lp-tolerance`` (the normaliser's float32 rounding);
- ``topk``: the merged top-k values and ids against the builder's own top-k, bit for bit.

``--controls`` also runs deliberately broken variants that must mismatch: ``no_offset`` (a
shard's ids without its vocab offset), ``one_shard`` (no gather: each rank's own shard only),
``padding`` (padding columns taken as tokens). Prints one JSON line on rank 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BUDGETS = (4, 8, 16, 31, 64)
VOCABS = (31, 97, 1000, 4099)
DEPTHS = (1, 3, 7, 15)
KINDS = ("normal", "ties", "peaked", "neg_inf", "constant")
BIG = ((151936, "normal", 15, 64), (151936, "ties", 15, 64))  # Qwen's vocabulary, block 16
PADDING_VALUE = 1e30


def cases() -> list[tuple[int, str, int, int, int]]:
    """Return (seed, kind, depths, vocab, budget) for every case."""
    out = []
    seed = 0
    for vocab in VOCABS:
        for kind in KINDS:
            for i, budget in enumerate(BUDGETS):
                out.append((seed, kind, DEPTHS[(seed + i) % len(DEPTHS)], vocab, budget))
                seed += 1
    for vocab, kind, depths, budget in BIG:
        out.append((seed, kind, depths, vocab, budget))
        seed += 1
    return out


def full_logits(seed: int, kind: str, depths: int, vocab: int) -> torch.Tensor:
    """Return [depths, vocab] float32 draft logits of one kind, the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "normal":
        return torch.randn(depths, vocab, generator=gen) * 3.0
    if kind == "ties":  # few distinct values: ties within and across shards, at the k edge
        return torch.randint(-3, 3, (depths, vocab), generator=gen).float()
    if kind == "peaked":  # one dominant value per row (log-prob exactly 0) plus tied rest
        out = torch.randint(-2, 1, (depths, vocab), generator=gen).float()
        out[torch.arange(depths), torch.randint(0, vocab, (depths,), generator=gen)] = 40.0
        return out
    if kind == "neg_inf":  # most tokens -inf: fewer finite entries than k, a dead last row
        out = torch.randn(depths, vocab, generator=gen)
        out[torch.rand(depths, vocab, generator=gen) < 0.9] = -float("inf")
        out[-1] = -float("inf")
        return out
    return torch.zeros(depths, vocab)  # constant rows: the order is all ties


def tree_fields(tree: Any) -> dict[str, Any]:
    """Return every field of a DDTree as plain data (floats as their bits)."""
    return {
        "tokens": tree.node_token_ids.tolist(),
        "depths": tree.depths.tolist(),
        "parents": list(tree.parents),
        "child_maps": [sorted(m.items()) for m in tree.child_maps],
        "visibility": tree.visibility.to(torch.uint8).flatten().tolist(),
        "visibility_shape": list(tree.visibility.shape),
        "lp_bits": tree.prefix_log_probs.view(torch.int64).tolist(),
    }


def local_shard(full: torch.Tensor, shard: Any, columns: int) -> torch.Tensor:
    """Return this rank's [L, columns] logits: its valid ids, then padding columns."""
    local = torch.full((full.shape[0], columns), PADDING_VALUE)
    local[:, : shard.valid] = full[:, shard.start : shard.start + shard.valid]
    return local


def run_rank(rank: int, world: int, store: str, controls: bool, queue: Any) -> None:
    """One rank: every case in every mode; rank 0 puts the summary on `queue`."""
    import sglang.srt.speculative.ddtree_tp as tp
    import sglang.srt.speculative.ddtree_utils as utils

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    group = dist.group.WORLD
    real_gather = tp._gather
    modes = ["sharded", *(["no_offset", "one_shard", "padding"] if controls else [])]
    summary: dict[str, Any] = {"ranks": world, "cases": len(cases()), "modes": {}}
    for mode in modes:
        started = time.perf_counter()
        tp._gather = (lambda packed, group: packed[None]) if mode == "one_shard" else real_gather
        counts = {"one_rank": 0, "builder": 0, "topk": 0, "ranks_disagree": 0}
        worst_lp = 0.0
        for seed, kind, depths, vocab, budget in cases():
            full = full_logits(seed, kind, depths, vocab)
            shard, columns = tp.vocab_shard(vocab, rank, world)
            local = local_shard(full, shard, columns)
            if mode == "no_offset":
                shard = dataclasses.replace(shard, start=0)
            if mode == "padding":
                shard = dataclasses.replace(shard, valid=columns)
            tree = tp.build_ddtree_tree_sharded(local, shard, budget, group)
            k = max(1, min(budget, vocab))
            top, ids, _, _ = tp.merge_candidates(
                tp._gather(tp.shard_candidates(local, shard, k), group), k
            )
            mine = tree_fields(tree)
            everyone: list[Any] = [None] * world
            dist.all_gather_object(everyone, (mine, top.numpy().tobytes(), ids.tolist()))
            if rank != 0:
                continue
            whole = tp.VocabShard(start=0, valid=vocab, vocab_size=vocab)
            one = tree_fields(tp.build_ddtree_tree_sharded(full, whole, budget, None))
            ref_tree = utils.build_ddtree_tree_from_logits(full, budget)
            ref = tree_fields(ref_tree)
            ref_top, ref_ids, _ = utils._top_log_probs_cpu(full.contiguous(), k)
            counts["ranks_disagree"] += any(other[0] != mine for other in everyone)
            counts["one_rank"] += any(other[0] != one for other in everyone)
            exact = [key for key in ref if key != "lp_bits"]
            counts["builder"] += any(
                other[0][key] != ref[key] for other in everyone for key in exact
            )
            if mine["tokens"] == ref["tokens"] and mine["depths"] == ref["depths"]:
                gap = (tree.prefix_log_probs - ref_tree.prefix_log_probs).abs()
                worst_lp = max(worst_lp, float(gap.max()) if gap.numel() else 0.0)
            counts["topk"] += any(
                other[1] != np.ascontiguousarray(ref_top).tobytes() or other[2] != ref_ids.tolist()
                for other in everyone
            )
        if rank == 0:
            summary["modes"][mode] = {
                "mismatch": counts,
                "max_prefix_lp_gap_vs_builder": worst_lp,
                "seconds": round(time.perf_counter() - started, 2),
            }
    tp._gather = real_gather
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        queue.put(summary)


def main() -> None:
    """Parse the arguments, fork the ranks, print rank 0's summary as one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--store", required=True, help="a fresh file path for gloo's FileStore")
    parser.add_argument("--controls", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    ctx = mp.get_context("fork")
    queue = ctx.SimpleQueue()
    procs = [
        ctx.Process(target=run_rank, args=(r, args.ranks, args.store, args.controls, queue))
        for r in range(args.ranks)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    codes = [proc.exitcode for proc in procs]
    if any(codes):
        raise SystemExit(f"a rank failed: exit codes {codes}")
    summary = queue.get()
    summary["wall_seconds"] = round(time.perf_counter() - started, 2)
    summary["pid"] = os.getpid()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
