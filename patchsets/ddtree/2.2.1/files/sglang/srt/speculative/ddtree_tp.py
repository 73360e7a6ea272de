"""DDTree from a vocab-parallel draft LM head: the same tree on every TP rank (torch only).

With ``--tp-size N`` sglang splits the LM head by vocabulary rows (``ParallelLMHead``): rank r
computes logits for its own shard of token ids only, and the shard's last columns may be
padding (the vocabulary is padded to a multiple of 64, or of 64 * N). The single-rank builder
(``ddtree_utils.build_ddtree_tree_from_logits``) reads full-vocabulary rows. A tree needs, per
draft position, only the top ``k = min(budget, V)`` tokens (value descending, then token id
ascending: the builder's tie order) and the full-vocabulary log-normaliser. So each rank

1. takes its shard's top k by a stable sort (the shard's vocab offset added to the ids, the
   padding columns sliced off so they are never picked) and its shard's maximum and
   ``sum(exp(x - max))`` in float64;
2. all-gathers those (one collective of ``[L, 2k + 2]`` float64 per rank);
3. merges the union in the builder's order (exact: the global top k lies in the union of the
   shards' top k, and equal values stay ordered by id), combines the shard sums into the
   normaliser (float64, rounded once to float32) and grows the tree with the builder's heap.

Every rank reads the same gathered bytes through the same code, so the trees are identical
on all ranks (verify reads the same tokens everywhere). The top-k log-probs equal the
single-rank builder's except for the normaliser: the builder sums ``exp`` in float32 over
the whole row, which no sharded sum reproduces bit for bit, so ``prefix_log_probs`` may differ
from the single-rank builder's by float32 rounding (about 1e-6) and a tree could only differ
where two candidates' prefix log-probs lie that close. Between TP sizes (1, 2, 4, ...) this
module's own normaliser is a float64 sum rounded once to float32: the trees are the same.

Torch's ``topk`` does not order equal values by index on the CPU (``topk`` of 1000 zeros gives
ids 3, 4, 1, 0, 2), so the per-rank selection is a stable sort, as the builder's device path.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from sglang.srt.speculative.ddtree_utils import DDTree, _build_visibility

__all__ = [
    "VocabShard",
    "vocab_shard",
    "shard_candidates",
    "merge_candidates",
    "combine_log_norms",
    "sharded_top_log_probs",
    "grow_ddtree",
    "build_ddtree_tree_sharded",
]

_INF = float("inf")
_NO_TOKEN = float(2**52)  # id of a filler entry: above every real id, exact in float64
_DEFAULT_PADDING = 64  # sglang's DEFAULT_VOCAB_PADDING_SIZE


@dataclass(frozen=True)
class VocabShard:
    """One rank's slice of the base vocabulary, as sglang's ``shard_indices`` describe it.

    start: global token id of local column 0 (``org_vocab_start_index``).
    valid: local columns that are real tokens (``num_org_elements``); columns from ``valid``
        on are padding and are never picked.
    vocab_size: the global base vocabulary (every rank's ``valid`` summed).
    """

    start: int
    valid: int
    vocab_size: int

    @classmethod
    def from_lm_head(cls, lm_head: object) -> VocabShard:
        """Return the shard of an sglang ``ParallelLMHead`` (base vocabulary only: its
        ``org_vocab_size``; LoRA-added rows are not drafted)."""
        indices = lm_head.shard_indices  # type: ignore[attr-defined]
        return cls(
            start=int(indices.org_vocab_start_index),
            valid=int(indices.num_org_elements),
            vocab_size=int(lm_head.org_vocab_size),  # type: ignore[attr-defined]
        )


def vocab_shard(
    vocab_size: int, rank: int, world_size: int, padding: int = _DEFAULT_PADDING
) -> tuple[VocabShard, int]:
    """Return (rank's shard, local columns incl. padding) in sglang 0.5.23's layout.

    Mirrors ``VocabParallelEmbedding``: the vocabulary is padded to a multiple of ``padding``
    (of ``padding * world_size`` when that does not divide evenly), each rank owns an equal
    run of padded ids, and the real ids in it are its valid columns (none on a late rank of a
    small vocabulary). Used by tests and to check a head's shard; the worker reads the head.
    """
    if (-(-vocab_size // padding) * padding) % world_size:
        padding *= world_size
    padded = -(-vocab_size // padding) * padding
    per_rank = padded // world_size
    start = min(rank * per_rank, vocab_size)
    end = min((rank + 1) * per_rank, vocab_size)
    return VocabShard(start=start, valid=end - start, vocab_size=vocab_size), per_rank


def shard_candidates(local_logits: torch.Tensor, shard: VocabShard, k: int) -> torch.Tensor:
    """Return this shard's candidates packed as float64 [L, 2k + 2]: k values, k global ids,
    the shard's row maximum, and its sum of exp(x - maximum) (float64).

    Values are ordered descending, equal values by id ascending (a stable sort of the local
    columns, whose ids ascend with the offset). A shard with fewer than k real columns is
    filled with (-inf, an id above every real one), which the merge never prefers to a real
    entry. A NaN anywhere makes the maximum NaN; +inf makes it +inf (checked after the merge,
    on every rank alike).
    """
    rows = local_logits[:, : shard.valid].float()
    depth_count = rows.shape[0]
    taken = min(k, shard.valid)
    packed = torch.full(
        (depth_count, 2 * k + 2), -_INF, dtype=torch.float64, device=local_logits.device
    )
    packed[:, k : 2 * k] = _NO_TOKEN
    if taken == 0:
        packed[:, 2 * k + 1] = 0.0
        return packed
    values, order = torch.sort(rows, dim=-1, descending=True, stable=True)
    packed[:, :taken] = values[:, :taken].double()
    packed[:, k : k + taken] = (order[:, :taken] + shard.start).double()
    row_max = torch.amax(rows, dim=-1)  # NaN propagates
    shift = row_max.masked_fill(row_max.abs() == _INF, 0.0).double()
    packed[:, 2 * k] = row_max.double()
    packed[:, 2 * k + 1] = (rows.double() - shift[:, None]).exp().sum(-1)
    return packed


def merge_candidates(
    gathered: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (values float32 [L, k], ids int64 [L, k], maxima [R, L], sums [R, L]) from the
    ranks' packed candidates [R, L, 2k + 2]: the union's top k by value descending, then id
    ascending (an id sort, then a stable value sort)."""
    ranks, depth_count, _ = gathered.shape
    values = gathered[:, :, :k].permute(1, 0, 2).reshape(depth_count, ranks * k)
    ids = gathered[:, :, k : 2 * k].permute(1, 0, 2).reshape(depth_count, ranks * k)
    by_id = torch.argsort(ids, dim=-1, stable=True)
    values, ids = values.gather(1, by_id), ids.gather(1, by_id)
    by_value = torch.argsort(values, dim=-1, descending=True, stable=True)[:, :k]
    top = values.gather(1, by_value).float()
    top_ids = ids.gather(1, by_value).to(torch.int64)
    return top, top_ids, gathered[:, :, 2 * k], gathered[:, :, 2 * k + 1]


def combine_log_norms(maxima: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    """Return the full-vocabulary logsumexp per row, float32 [L], from each shard's maximum m_r
    and sum s_r of exp(x - m_r) ([R, L] float64): M + log(sum_r s_r exp(m_r - M)), M = max m_r,
    in float64, rounded once. An all -inf row gives -inf. Raises ValueError naming NaN or +inf,
    as the single-rank builder does (NaN first)."""
    if bool(torch.isnan(maxima).any()) or bool(torch.isnan(sums).any()):
        raise ValueError("logits contain NaN")
    if bool(torch.isposinf(maxima).any()):
        raise ValueError("logits contain +inf")
    peak = maxima.amax(0)
    live = peak > -_INF
    safe_peak = torch.where(live, peak, torch.zeros_like(peak))
    scale = torch.where(maxima > -_INF, (maxima - safe_peak).exp(), torch.zeros_like(maxima))
    total = (sums * scale).sum(0)
    norm = torch.where(live, safe_peak + total.log(), torch.full_like(peak, -_INF))
    return norm.float()


def _gather(packed: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """Return every rank's packed candidates stacked by rank, [R, L, 2k + 2] (one all-gather;
    the rank order is the group's, the same on every rank). No group: this rank alone."""
    if group is None:
        return packed[None]
    world = dist.get_world_size(group)
    parts = [torch.empty_like(packed) for _ in range(world)]
    dist.all_gather(parts, packed.contiguous(), group=group)
    return torch.stack(parts)


def sharded_top_log_probs(
    local_logits: torch.Tensor,
    shard: VocabShard,
    k: int,
    group: dist.ProcessGroup | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the global top-k log-probs (float32 [L, k]) and token ids (int64 [L, k]) per
    row, as numpy arrays on the host, from this rank's [L, local columns] logits.

    A collective over ``group`` (None: no collective, this rank holds the whole vocabulary):
    every rank of it must call it with the same L and k. Rows that are
    entirely -inf yield all -inf. Raises ValueError (on every rank) on NaN or +inf logits.
    """
    gathered = _gather(shard_candidates(local_logits, shard, k), group)
    top, ids, maxima, sums = merge_candidates(gathered, k)
    norm = combine_log_norms(maxima, sums)
    top_np = top.cpu().numpy()
    norm_np = norm.cpu().numpy()[:, None]
    with np.errstate(invalid="ignore"):  # -inf - -inf in dead rows, replaced just below
        log_probs = np.where(top_np[:, :1] > -_INF, top_np - norm_np, np.float32(-_INF))
    return log_probs, ids.cpu().numpy()


def grow_ddtree(log_probs: np.ndarray, ids: np.ndarray, budget: int) -> DDTree:
    """Return the DDTree of at most `budget` nodes from per-depth top-k log-probs and ids.

    The heap of ``build_ddtree_tree_from_logits`` (same entries, same tie order: score, then
    depth, rank, parent), written out here because that function takes logits, not top-k
    lists. Given the builder's own top-k it returns the builder's tree, field for field.
    """
    num_depths, width = log_probs.shape
    parents = [-1]
    child_maps: list[dict[int, int]] = [{}]
    tokens: list[int] = []
    depths: list[int] = []
    scores: list[float] = []
    best = log_probs[:, 0].tolist() if width else [-_INF] * num_depths
    heap: list[tuple[float, int, int, int, float]] = []
    if budget > 0 and num_depths > 0 and best[0] != -_INF:
        heap.append((-best[0], 0, 0, 0, 0.0))
    count = 0
    while heap and count < budget:
        neg_score, d, rank, parent, parent_score = heapq.heappop(heap)
        count += 1
        token = int(ids[d, rank])
        parents.append(parent)
        child_maps.append({})
        child_maps[parent][token] = count
        tokens.append(token)
        depths.append(d + 1)
        scores.append(-neg_score)
        if rank + 1 < width:
            sibling = log_probs[d, rank + 1].item()
            if sibling != -_INF:
                heapq.heappush(heap, (-(parent_score + sibling), d, rank + 1, parent, parent_score))
        if d + 1 < num_depths and best[d + 1] != -_INF:
            heapq.heappush(heap, (neg_score - best[d + 1], d + 1, 0, count, -neg_score))
    return DDTree(
        node_token_ids=torch.tensor(tokens, dtype=torch.long),
        depths=torch.tensor(depths, dtype=torch.long),
        prefix_log_probs=torch.tensor(scores, dtype=torch.float64),
        parents=parents,
        child_maps=child_maps,
        visibility=_build_visibility(parents, max(depths, default=0)),
    )


def build_ddtree_tree_sharded(
    local_logits: torch.Tensor,
    shard: VocabShard,
    budget: int,
    group: dist.ProcessGroup | None = None,
) -> DDTree:
    """Return the DDTree of `budget` nodes from this rank's vocab shard of the draft logits.

    local_logits: [L, local columns] (padding columns from ``shard.valid`` on are ignored).
    A collective over ``group`` (sglang: the TP group's ``device_group``; None: one rank, no
    collective) unless L or the vocabulary is empty; every rank returns the same tree.
    Raises ValueError on a non-2-D tensor, a negative budget, or (on every rank) NaN / +inf
    logits.
    """
    if local_logits.dim() != 2:
        raise ValueError(f"logits must be [L, V], got shape {tuple(local_logits.shape)}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if not 0 <= shard.valid <= local_logits.shape[1]:
        raise ValueError(
            f"shard has {shard.valid} valid columns, logits have {local_logits.shape[1]}"
        )
    num_depths = local_logits.shape[0]
    if num_depths == 0 or shard.vocab_size == 0:
        return grow_ddtree(np.zeros((num_depths, 0), np.float32), np.zeros((0, 0)), 0)
    k = max(1, min(budget, shard.vocab_size))
    log_probs, ids = sharded_top_log_probs(local_logits, shard, k, group)
    return grow_ddtree(log_probs, ids, budget)
