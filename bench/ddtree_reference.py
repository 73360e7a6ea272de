"""The reference DDTree builder's algorithm, re-implemented for side-by-side timing.

The reference is `build_ddtree_tree` in ddtree.py of liranringel/ddtree (the paper's code
release). This module re-states its steps from a reading of that function, in our own code,
so the builder in the ddtree patchset can be timed against the same work on the same logits:

1. one `topk` per depth (k = min(budget, V)) on the float32 logits, in topk's own order;
2. the full-vocabulary `logsumexp` per depth; log-probs = top logits - logsumexp, copied to
   the host as float32 and read through numpy;
3. best-first expansion with `heapq`: an entry is (-log-weight, tuple of ranks along the
   path, parent, depth, rank, log-weight); the tuple of ranks breaks ties. A popped node
   offers its next sibling (log-weight minus its own log-prob plus the next rank's) and its
   first child (plus the next depth's best log-prob);
4. numpy visibility: row i copies its parent's row over columns < i and sets (i, i).

It also times its three stages as the original does (copy, heap, visibility). Like the
original it assumes finite logits: a row of -inf gives NaN weights there. Ties (equal logits,
equal prefix sums) may come out in another order than the patchset's builder, which breaks
them by token id and (depth, rank, parent); on tie-free logits the trees are equal
(tests/ddtree/test_ddtree_reference.py).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np
import torch

STAGES = ("copy", "heap", "visibility")


@dataclass(frozen=True)
class ReferenceTree:
    """What the reference returns: node tokens and depths (int64 [n]), parents (n + 1 ints,
    -1 for the root), child maps (n + 1 dicts token -> node), visibility (bool [n + 1, n + 1])
    and the seconds spent per stage of `STAGES`."""

    node_token_ids: torch.Tensor
    depths: torch.Tensor
    parents: list[int]
    child_maps: list[dict[int, int]]
    visibility: torch.Tensor
    stage_s: dict[str, float]


def _synced_clock(device: torch.device) -> float:
    """Return perf_counter() after waiting for `device` (the original's CUDA-aware clock)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def build_reference_tree(draft_logits: torch.Tensor, budget: int) -> ReferenceTree:
    """Return the reference's tree for `draft_logits` [L, V] and `budget` draft nodes."""
    stage_s = dict.fromkeys(STAGES, 0.0)
    if budget <= 0 or draft_logits.shape[0] == 0:
        return ReferenceTree(
            torch.empty(0, dtype=torch.long),
            torch.empty(0, dtype=torch.long),
            [-1],
            [{}],
            torch.ones((1, 1), dtype=torch.bool),
            stage_s,
        )
    width = min(budget, int(draft_logits.shape[-1]))
    depth_count = int(draft_logits.shape[0])

    started = _synced_clock(draft_logits.device)
    as_float = draft_logits.float()
    top_logits, top_ids = torch.topk(as_float, k=width, dim=-1)
    log_norm = torch.logsumexp(as_float, dim=-1, keepdim=True)
    log_probs = (top_logits - log_norm).to(device="cpu", dtype=torch.float32).numpy()
    token_ids = top_ids.to(device="cpu", dtype=torch.long).numpy()
    stage_s["copy"] = _synced_clock(draft_logits.device) - started

    started = time.perf_counter()
    best = float(log_probs[0, 0])
    frontier: list[tuple[float, tuple[int, ...], int, int, int, float]] = [
        (-best, (0,), 0, 1, 0, best)
    ]
    tokens = np.empty(budget, dtype=np.int64)
    depths = np.empty(budget, dtype=np.int64)
    parents = np.empty(budget + 1, dtype=np.int32)
    parents[0] = -1
    child_maps: list[dict[int, int]] = [{}]
    count = 0
    while frontier and count < budget:
        _, ranks, parent, depth, rank, weight = heapq.heappop(frontier)
        token = int(token_ids[depth - 1, rank])
        node = count + 1
        tokens[count] = token
        depths[count] = depth
        parents[node] = parent
        child_maps.append({})
        child_maps[parent][token] = node
        count += 1
        if rank + 1 < width:
            row = log_probs[depth - 1]
            sibling = weight - float(row[rank]) + float(row[rank + 1])
            entry = (-sibling, (*ranks[:-1], rank + 1), parent, depth, rank + 1, sibling)
            heapq.heappush(frontier, entry)
        if depth < depth_count:
            child = weight + float(log_probs[depth, 0])
            heapq.heappush(frontier, (-child, (*ranks, 0), node, depth + 1, 0, child))
    stage_s["heap"] = time.perf_counter() - started

    started = time.perf_counter()
    size = count + 1
    visibility = np.zeros((size, size), dtype=np.bool_)
    visibility[0, 0] = True
    for node in range(1, size):
        visibility[node, :node] = visibility[int(parents[node]), :node]
        visibility[node, node] = True
    stage_s["visibility"] = time.perf_counter() - started

    return ReferenceTree(
        node_token_ids=torch.from_numpy(tokens[:count]),
        depths=torch.from_numpy(depths[:count]),
        parents=parents[:size].tolist(),
        child_maps=child_maps,
        visibility=torch.from_numpy(visibility),
        stage_s=stage_s,
    )
