"""Tensor logic of DDTree inside the DFlash worker (torch only, no sglang import).

The DFlash worker drafts one block, builds one DDTree per request from the draft
logits, verifies every tree in one TARGET_VERIFY forward and keeps the accepted
path. Everything here decides *what* happens (tree layout, masks, positions,
target tokens, accepted nodes, KV slots, next draft inputs); the sglang glue in
ddtree_info.py only moves the results into sglang's batch. So all of it runs and
is tested on the CPU.

Verify layout: every request gets `width = max(budget + 1, block size)` slots
(ddtree_memory; node 0 is the root, the committed bonus token). A tree with fewer nodes is padded with FINITE values:
its root token as input id, its root position, a self-only mask row. Padded slots
are unreachable in the walk (links -1, walk token -1, never 0) and their KV slots
are freed after the verify.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "DDTreeVerifyBatch",
    "pack_ddtree_verify_batch",
    "build_ddtree_custom_mask",
    "compute_draft_logits",
    "sample_ddtree_posterior",
    "collect_accepted_tokens",
    "select_accepted_rows",
    "split_ddtree_kv_slots",
    "find_ddtree_restriction_errors",
    "DDTREE_MASK_BACKENDS",
]

# Rows that one pass of non-greedy sampling filters and samples; ddtree_memory counts
# its workspace with the same number (kept in two places: this file imports no sglang).
SAMPLING_CHUNK_ROWS = 128

# Attention backends (class names) whose TARGET_VERIFY honours spec_info.custom_mask.
DDTREE_MASK_BACKENDS = ("TritonAttnBackend", "FlashInferAttnBackend")
# Of those, the ones whose CUDA graphs capture and replay the custom mask.
DDTREE_GRAPH_MASK_BACKENDS = ("TritonAttnBackend",)


@dataclass(frozen=True)
class DDTreeVerifyBatch:
    """B trees laid out for one verify forward, `width` slots per request.

    input_ids: int64 [B * width], root token then node tokens; padding = root token.
    positions: int64 [B * width], prefix_len + depth; padding = prefix_len.
    tree_mask: bool [B, width, width], ancestor-only (row = query); padding rows self-only.
    next_token, next_sibling: int64 [B, width], EAGLE-layout links, -1 for none/padding.
    walk_tokens: int64 [B, width], node tokens for the walk; padding = -1 (never matches).
    num_nodes: int64 [B], real slots per request (tree nodes + root).
    max_depth: deepest node over the batch (bounds the walk).
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    tree_mask: torch.Tensor
    next_token: torch.Tensor
    next_sibling: torch.Tensor
    walk_tokens: torch.Tensor
    num_nodes: torch.Tensor
    width: int
    max_depth: int

    def to(self, device: torch.device | str) -> DDTreeVerifyBatch:
        """Return a copy with every tensor on `device` (non-blocking from the CPU)."""
        moved = {
            name: value.to(device, non_blocking=True)
            for name, value in vars(self).items()
            if isinstance(value, torch.Tensor)
        }
        return DDTreeVerifyBatch(**moved, width=self.width, max_depth=self.max_depth)


def pack_ddtree_verify_batch(compiled: Sequence[Any], width: int) -> DDTreeVerifyBatch:
    """Return the padded CPU verify layout of B compiled trees (see DDTreeVerifyBatch).

    compiled: B CompiledDDTree (ddtree_utils.compile_ddtree_tree) on the CPU, each
    compiled with its request's root token and prefix length (the root position).
    width: slots per request, >= the largest tree's node count (root included).
    Raises ValueError on an empty tree or one wider than `width`.
    """
    batch = len(compiled)
    input_ids = torch.empty((batch, width), dtype=torch.long)
    positions = torch.empty((batch, width), dtype=torch.long)
    tree_mask = torch.eye(width, dtype=torch.bool).repeat(batch, 1, 1)
    next_token = torch.full((batch, width), -1, dtype=torch.long)
    next_sibling = torch.full((batch, width), -1, dtype=torch.long)
    walk_tokens = torch.full((batch, width), -1, dtype=torch.long)
    num_nodes = torch.empty(batch, dtype=torch.long)
    max_depth = 0
    for b, tree in enumerate(compiled):
        size = int(tree.input_ids.numel())
        if not 1 <= size <= width:
            raise ValueError(f"tree {b} has {size} slots, expected 1..{width}")
        root, prefix = int(tree.input_ids[0]), int(tree.positions[0])
        input_ids[b] = root
        input_ids[b, :size] = tree.input_ids
        positions[b] = prefix
        positions[b, :size] = tree.positions
        tree_mask[b, :size, :size] = tree.attention_mask
        next_token[b, :size] = tree.retrieve_next_token
        next_sibling[b, :size] = tree.retrieve_next_sibling
        walk_tokens[b, :size] = tree.input_ids
        num_nodes[b] = size
        max_depth = max(max_depth, int(tree.positions.max()) - prefix)
    return DDTreeVerifyBatch(
        input_ids=input_ids.reshape(-1),
        positions=positions.reshape(-1),
        tree_mask=tree_mask,
        next_token=next_token,
        next_sibling=next_sibling,
        walk_tokens=walk_tokens,
        num_nodes=num_nodes,
        width=width,
        max_depth=max_depth,
    )


def build_ddtree_custom_mask(tree_mask: torch.Tensor, prefix_lens: Sequence[int]) -> torch.Tensor:
    """Return sglang's flat TARGET_VERIFY allow-mask for B trees.

    tree_mask: bool [B, W, W]. prefix_lens: B committed lengths.
    Per request, a [W, prefix_len + W] block (every query sees the whole prefix,
    then its tree row) is flattened row-major; blocks are concatenated in batch
    order, the layout DFlash/EAGLE verify masks use.
    """
    batch, width, _ = tree_mask.shape
    chunks = []
    for b, prefix in enumerate(prefix_lens):
        prefix_block = torch.ones((width, int(prefix)), dtype=torch.bool, device=tree_mask.device)
        chunks.append(torch.cat([prefix_block, tree_mask[b]], dim=1).reshape(-1))
    if not chunks:
        return torch.empty((0,), dtype=torch.bool, device=tree_mask.device)
    if len(chunks) != batch:
        raise ValueError(f"{batch} trees but {len(chunks)} prefix lens")
    return torch.cat(chunks)


def compute_draft_logits(draft_hidden: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
    """Return float32 draft logits [B, L, V] for the block positions after the root.

    draft_hidden: [B, block_size, H] draft hidden states (row 0 is the root).
    lm_head_weight: [V, H] the target's (unsharded, base-vocab) LM head.
    """
    hidden = draft_hidden[:, 1:, :].to(lm_head_weight.dtype)
    return torch.matmul(hidden, lm_head_weight.T).float()


def sample_ddtree_posterior(
    logits: torch.Tensor,
    width: int,
    temperatures: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    generator: torch.Generator | None = None,
    chunk_rows: int = SAMPLING_CHUNK_ROWS,
) -> torch.Tensor:
    """Return one target token per tree node [B, width], each node sampled independently.

    logits: [B * width, V] target logits, row = (request, node).
    temperatures, top_ks, top_ps, min_ps: [B] per-request sampling parameters
    (top_k >= V or <= 0 means no top-k; top_p 1 and min_p 0 mean none).
    chunk_rows: rows filtered and sampled at once, so the sort's workspace is
    chunk_rows x V whatever the batch and width (ddtree_memory counts it).
    Lossless without draft probabilities: the walk reads each node's sample at
    most once, and a node's sample is drawn from the target's distribution given
    that node's prefix, so the committed tokens follow the target's sampling.
    Filtering is top-k, then top-p on the renormalised top-k mass, then min-p.
    """
    rows, vocab = logits.shape
    batch = rows // width
    per_row = [
        temperatures.float().repeat_interleave(width),
        top_ks.long().repeat_interleave(width),
        top_ps.float().repeat_interleave(width),
        min_ps.float().repeat_interleave(width),
    ]
    step = max(int(chunk_rows), 1)
    choices = [
        _sample_rows(logits[i : i + step], *(p[i : i + step] for p in per_row), generator)
        for i in range(0, rows, step)
    ]
    if not choices:
        return torch.empty((batch, width), dtype=torch.long, device=logits.device)
    return torch.cat(choices).view(batch, width)


def _sample_rows(
    logits: torch.Tensor,
    temperatures: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Return one sampled token id per row [R] of logits [R, V] with per-row parameters [R]."""
    vocab = logits.shape[1]
    scaled = logits.float() / temperatures[:, None]
    ks = torch.where((top_ks <= 0) | (top_ks > vocab), torch.full_like(top_ks, vocab), top_ks)
    k_cap = int(ks.max())
    if k_cap == vocab and bool((top_ps >= 1).all()) and bool((min_ps <= 0).all()):
        # Nothing to filter: sample the full softmax, no vocabulary-wide sort.
        return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).view(-1)
    if k_cap < vocab:
        values, ids = torch.topk(scaled, k_cap, dim=-1)
    else:
        values, ids = torch.sort(scaled, dim=-1, descending=True)
    del scaled
    ranks = torch.arange(values.shape[1], device=logits.device)
    values = values.masked_fill(ranks[None, :] >= ks[:, None], float("-inf"))
    probs = torch.softmax(values, dim=-1)
    del values
    mass_before = torch.cumsum(probs, dim=-1) - probs
    keep = mass_before < top_ps[:, None]
    del mass_before
    keep &= probs >= min_ps[:, None] * probs[:, :1]
    keep[:, 0] = True
    probs = torch.where(keep, probs, torch.zeros_like(probs))
    choice = torch.multinomial(probs, 1, generator=generator)
    return torch.gather(ids, 1, choice).view(-1)


def collect_accepted_tokens(
    walk_tokens: torch.Tensor,
    accept_index: torch.Tensor,
    accept_length: torch.Tensor,
    bonus: torch.Tensor,
) -> list[list[int]]:
    """Return per request the tokens to append: accepted node tokens, then the bonus.

    walk_tokens: [B, W]; accept_index: [B, D + 1] (root first, -1 padded);
    accept_length: [B] accepted draft nodes; bonus: [B]. One device-to-host copy.
    """
    tokens = torch.gather(walk_tokens, 1, accept_index.clamp(min=0))
    packed = torch.cat([tokens, accept_length[:, None], bonus[:, None]], dim=1).cpu().tolist()
    out = []
    for row in packed:
        length = int(row[-2])
        out.append([int(t) for t in row[1 : 1 + length]] + [int(row[-1])])
    return out


def select_accepted_rows(
    accept_index: torch.Tensor, commit_lens: torch.Tensor, width: int
) -> torch.Tensor:
    """Return flat verify rows (b * width + node) of the committed nodes, path order.

    accept_index: [B, D + 1] accepted local nodes, root first.
    commit_lens: [B] committed slots per request (<= accept_length + 1): the root and
    the first commit_len - 1 accepted nodes, whose KV and hidden states are kept.
    The last row of each request is the flat index of its last accepted node.
    """
    batch, depth_slots = accept_index.shape
    device = accept_index.device
    steps = torch.arange(depth_slots, device=device)[None, :]
    base = torch.arange(batch, device=device)[:, None] * width
    keep = steps < commit_lens.to(device=device, dtype=torch.long)[:, None]
    return (base + accept_index)[keep]


def split_ddtree_kv_slots(
    out_cache_loc: torch.Tensor, accepted_rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (kept KV slots in path order, freed KV slots) of one verify.

    out_cache_loc: [B * width] KV slots written by the verify, row-major.
    accepted_rows: flat rows from select_accepted_rows.
    The kept slots become the requests' next req_to_token entries (page size 1:
    compaction is an index remap, no KV is copied); all other slots, padding
    included, go back to the allocator.
    """
    keep = torch.zeros(out_cache_loc.shape[0], dtype=torch.bool, device=out_cache_loc.device)
    keep[accepted_rows] = True
    return out_cache_loc[accepted_rows], out_cache_loc[~keep]


def find_ddtree_restriction_errors(
    *,
    page_size: int,
    tp_size: int,
    attention_backend: str,
    cuda_graph: bool,
    hybrid_mamba: bool,
    lm_head_sharded_or_extended: bool,
) -> list[str]:
    """Return one message per unsupported setting of a DDTREE server (empty when fine)."""
    errors = []
    if page_size != 1:
        errors.append(
            f"--page-size must be 1 (got {page_size}): tree KV slots are compacted by "
            "remapping single tokens, which paged KV cannot do."
        )
    if tp_size != 1:
        errors.append(
            f"--tp-size must be 1 (got {tp_size}): the tree is built from full-vocabulary "
            "draft logits on one rank."
        )
    if attention_backend not in DDTREE_MASK_BACKENDS:
        errors.append(
            f"attention backend {attention_backend} does not apply a custom tree mask in "
            "TARGET_VERIFY; use --attention-backend triton (or flashinfer)."
        )
    elif cuda_graph and attention_backend not in DDTREE_GRAPH_MASK_BACKENDS:
        errors.append(
            f"{attention_backend} CUDA graphs replay verify without the tree mask; use "
            "--attention-backend triton or --disable-cuda-graph."
        )
    if hybrid_mamba:
        errors.append(
            "hybrid Mamba/linear-attention targets are not supported: their verify scans "
            "the tree slots as a chain, and the state commit would have to use the flat "
            "index of the last accepted node, not commit_len - 1."
        )
    if lm_head_sharded_or_extended:
        errors.append("the target LM head must be one unsharded base-vocabulary shard.")
    return errors
