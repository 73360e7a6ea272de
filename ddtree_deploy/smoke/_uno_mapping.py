"""The mapping between SGLang 0.5.23's UNO/EAGLE tree layout and a DDTree tree (torch only).

`build_uno_tree_proposal` (sglang/kernels/ops/speculative/uno_tree.py) returns one tree per
request in EAGLE's candidate-lineage layout, nodes in best-first selection order:

- ``draft_tokens[b, i - 1]``: the token of node i (node 0, the root, is ``root_tokens[b]``);
- ``top_scores_index[b, i - 1] = parent(i) * K + rank(i)``: the edge that made node i, where
  ``K`` is ``candidate_top_k`` and ``rank(i)`` the token's rank in its depth's top-K;
- ``parent_list[b, 0] = -1`` and ``parent_list[b, p] = top_scores_index[b, p - 1]``
  (p = 1 .. Q - 2), row width ``K * (max_depth - 1) + 1``.

A DDTree tree (ddtree_utils.DDTree) lists the same nodes in the same order (both are
best-first pops with the same tie order), so the mapping is index for index:

    node_token_ids[i - 1] == draft_tokens[i - 1]
    parents[i]            == top_scores_index[i - 1] // K
    depths[i - 1]         == depths[parents[i] - 1] + 1   (the root has depth 0)

and back: a child's rank is its place among its parent's children (best-first offers rank
r + 1 only after rank r), so ``top_scores_index[i - 1] = parents[i] * K + sibling_order(i)``.
`build_tree_kernel_efficient` reads ``top_scores_index // K`` and compares edge codes with
``parent_list`` entries only, so any K above every rank gives the same mask and links.

Nothing here imports sglang or triton; the worker can use these functions as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TreeNodes:
    """One tree as DDTree lists it: tokens, parents and depths of nodes 1..n, root at 0.

    node_tokens: n ints, token of node i + 1.
    parents: n + 1 ints; parents[0] == -1 and parents[i] < i.
    depths: n ints, depth of node i + 1 (the root has depth 0).
    ranks: n ints, rank of node i + 1's token among its parent's children.
    """

    node_tokens: list[int]
    parents: list[int]
    depths: list[int]
    ranks: list[int]


def tree_from_uno_row(
    draft_tokens: torch.Tensor, top_scores_index: torch.Tensor, candidate_top_k: int
) -> TreeNodes:
    """Return the DDTree view of one request's UNO proposal.

    draft_tokens, top_scores_index: [Q - 1] int rows of the proposal (one request).
    candidate_top_k: the K the proposal was built with (its edge codes are parent * K + rank).
    Raises ValueError when an edge names a parent that is not an earlier node.
    """
    tokens = [int(t) for t in draft_tokens.tolist()]
    edges = [int(e) for e in top_scores_index.tolist()]
    parents = [-1]
    depths: list[int] = []
    ranks: list[int] = []
    for node, edge in enumerate(edges, start=1):
        parent, rank = divmod(edge, candidate_top_k)
        if not 0 <= parent < node:
            raise ValueError(f"node {node}: edge {edge} names parent {parent}")
        parents.append(parent)
        depths.append(1 if parent == 0 else depths[parent - 1] + 1)
        ranks.append(rank)
    return TreeNodes(node_tokens=tokens, parents=parents, depths=depths, ranks=ranks)


def sibling_ranks(parents: list[int]) -> list[int]:
    """Return each node's place among its parent's children (nodes 1..n, index order)."""
    seen: dict[int, int] = {}
    ranks = []
    for parent in parents[1:]:
        ranks.append(seen.get(parent, 0))
        seen[parent] = ranks[-1] + 1
    return ranks


def uno_layout_from_tree(
    node_tokens: list[int], parents: list[int], candidate_top_k: int, max_depth: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (draft_tokens [n], top_scores_index [n], parent_list [K * (max_depth - 1) + 1])
    for one DDTree tree: what `build_tree_kernel_efficient` takes for it (int64, CPU).

    candidate_top_k: must exceed every sibling rank; max_depth: the draft depths L (>= the
    tree's depth). Raises ValueError when the parent list cannot hold the tree's nodes.
    """
    ranks = sibling_ranks(parents)
    if ranks and max(ranks) >= candidate_top_k:
        raise ValueError(f"a node has rank {max(ranks)} >= candidate_top_k {candidate_top_k}")
    width = candidate_top_k * max(max_depth - 1, 0) + 1
    if len(node_tokens) > width:
        raise ValueError(f"{len(node_tokens)} nodes do not fit a parent list of width {width}")
    edges = [parents[i] * candidate_top_k + ranks[i - 1] for i in range(1, len(parents))]
    parent_list = torch.full((width,), -1, dtype=torch.long)
    if len(edges) > 1:
        parent_list[1 : len(edges)] = torch.tensor(edges[:-1], dtype=torch.long)
    return (
        torch.tensor(node_tokens, dtype=torch.long),
        torch.tensor(edges, dtype=torch.long),
        parent_list,
    )
