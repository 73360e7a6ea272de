"""DDTree draft trees built from one DFlash block-diffusion pass (torch only).

DDTree (Ringel & Romano, arXiv 2604.12989) turns the per-position draft
distributions of one DFlash pass into a token tree that maximises the expected
number of accepted tokens (the sum of prefix probabilities) under a node budget,
and verifies the whole tree in one target pass with an ancestor-only mask.

Node 0 is always the root (the previous bonus token, already committed); the
budget counts the draft nodes 1..n only. Nothing here imports sglang, so the
module can be tested and benchmarked on its own.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "DDTree",
    "CompiledDDTree",
    "build_ddtree_tree_from_logits",
    "follow_verified_tree",
    "compile_ddtree_tree",
    "stack_compiled_ddtrees",
    "follow_verified_trees_batched",
]


@dataclass(frozen=True)
class DDTree:
    """A draft tree; node i >= 1 is draft node i in pop (best-first) order.

    node_token_ids: int64 [n], token of node i + 1.
    depths: int64 [n], 1-based depth of node i + 1 (the root has depth 0).
    prefix_log_probs: float64 [n], draft log-probability of the prefix ending at node i + 1.
    parents: n + 1 ints; parents[0] == -1 and parents[i] < i.
    child_maps: n + 1 dicts token -> child node index.
    visibility: bool [n + 1, n + 1]; row i is True at i and at its ancestors.
    All tensors live on the CPU: the builder is host-side by nature (a heap).
    """

    node_token_ids: torch.Tensor
    depths: torch.Tensor
    prefix_log_probs: torch.Tensor
    parents: list[int]
    child_maps: list[dict[int, int]]
    visibility: torch.Tensor

    @property
    def num_nodes(self) -> int:
        """Number of draft nodes n (the root excluded)."""
        return len(self.parents) - 1


@dataclass(frozen=True)
class CompiledDDTree:
    """Verify inputs for one tree, plus sglang's EAGLE tree layout.

    input_ids: int64 [n + 1], root token then node tokens.
    positions: int64 [n + 1], start_position + depth (siblings share one).
    attention_mask: bool [n + 1, n + 1], ancestor-only (row = query).
    retrieve_index: int64 [n + 1], local node index (a batch adds b * (n + 1)).
    retrieve_next_token: int64 [n + 1], first child or -1.
    retrieve_next_sibling: int64 [n + 1], next sibling (rank order) or -1.
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    attention_mask: torch.Tensor
    retrieve_index: torch.Tensor
    retrieve_next_token: torch.Tensor
    retrieve_next_sibling: torch.Tensor


_INF = float("inf")
# The CPU top-k first reads a strided sample of each row: the sample's k-th largest value is
# a lower bound of the row's k-th largest, so one compare pass finds a few candidates that
# surely hold the row's top k (all of them, ties included). The stride trades the sample's
# cost (V / stride) against the candidates' (about k * stride); rows shorter than
# _MIN_SAMPLE_PER_K * k entries are read whole.
_MIN_SAMPLE_PER_K = 16
_MAX_STRIDE = 64


def _log_norm(logits32: torch.Tensor, row_max: torch.Tensor) -> torch.Tensor:
    """Return the full-vocabulary logsumexp per row, [L, 1], bit for bit torch.logsumexp's.

    row_max: [L, 1], each row's exact maximum (the top-k's first value), which spares the
    amax pass torch.logsumexp makes; the other steps are its own (shift, exp, sum, log,
    unshift). A row holding NaN gives NaN and one holding +inf gives +inf, so the input
    check reads them here rather than in a pass of its own; an all -inf row gives -inf.
    """
    shift = row_max.masked_fill(row_max.abs() == _INF, 0.0)
    return (logits32 - shift).exp_().sum(-1, keepdim=True).log_().add_(shift)


def _sample_stride(vocab_size: int, k: int) -> int:
    """Return the stride of the sample that bounds a row's k-th largest value (0: none)."""
    if vocab_size < _MIN_SAMPLE_PER_K * k * 2:
        return 0
    stride = 2
    while stride < _MAX_STRIDE and vocab_size >= _MIN_SAMPLE_PER_K * k * stride * 8:
        stride *= 2
    return stride


def _row_top(row: np.ndarray, k: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (values float32 [k], ids int64 [k]): the k largest entries of `row`, by value
    descending then id ascending (at the edge of the k too).

    A row holding NaN may give NaN values (its logsumexp is NaN, so the builder raises).
    """
    if stride:
        sample = row[::stride]
        bound = np.partition(sample, sample.size - k)[sample.size - k]  # NaN sorts last
        ids = np.flatnonzero(row >= bound)
    else:
        ids = np.flatnonzero(row >= -_INF)
    if ids.size < k:  # fewer than k comparable entries: the row holds NaN
        return np.full(k, np.nan, dtype=np.float32), np.zeros(k, dtype=np.int64)
    values = row[ids]
    if ids.size > k:
        edge = np.partition(values, ids.size - k)[ids.size - k]
        keep = values > edge
        equal = values == edge
        wanted = k - int(np.count_nonzero(keep))
        if int(np.count_nonzero(equal)) > wanted:  # a tie at the edge: lowest ids win
            equal &= np.cumsum(equal) <= wanted
        keep |= equal
        ids, values = ids[keep], values[keep]
    order = np.argsort(-values, kind="stable")  # ids ascend: equal values keep id order
    return values[order], ids[order]


def _top_log_probs_cpu(
    logits32: torch.Tensor, k: int
) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """Return (top values [L, k], their ids [L, k], logsumexp [L, 1]) for CPU logits.

    The rows' top-k run on as many threads as torch may use (numpy lets go of the GIL in
    its loops), so the builder takes the cores torch.set_num_threads grants, no more.
    """
    logits_np = logits32.numpy()
    depth_count, vocab_size = logits_np.shape
    stride = _sample_stride(vocab_size, k)
    top = np.empty((depth_count, k), dtype=np.float32)
    ids = np.empty((depth_count, k), dtype=np.int64)

    errors: list[BaseException] = []

    def fill(rows: range) -> None:
        try:
            for r in rows:
                top[r], ids[r] = _row_top(logits_np[r], k, stride)
        except BaseException as exc:  # handed to the calling thread below
            errors.append(exc)

    workers = max(1, min(torch.get_num_threads(), depth_count))
    groups = [range(w, depth_count, workers) for w in range(workers)]
    helpers = [threading.Thread(target=fill, args=(g,)) for g in groups[1:]]
    for helper in helpers:
        helper.start()
    fill(groups[0])
    for helper in helpers:
        helper.join()
    if errors:
        raise errors[0]
    top_t = torch.from_numpy(top)
    return top_t, ids, _log_norm(logits32, top_t[:, :1])


def _top_log_probs_device(
    logits32: torch.Tensor, k: int
) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """Return what `_top_log_probs_cpu` returns, computed on the logits' device and brought
    to the host in ONE transfer (the call's only sync): a stable descending sort orders
    equal values by id, as the CPU path does."""
    ordered, order = torch.sort(logits32, dim=-1, descending=True, stable=True)
    top = ordered[:, :k]
    log_norm = _log_norm(logits32, top[:, :1])
    packed = torch.cat(
        [top.view(torch.int32), log_norm.view(torch.int32), order[:, :k].to(torch.int32)], 1
    ).cpu()
    host = packed.numpy()
    top_host = torch.from_numpy(host[:, :k].view(np.float32))
    log_norm_host = torch.from_numpy(host[:, k : k + 1].view(np.float32))
    return top_host, host[:, k + 1 :].astype(np.int64), log_norm_host


def _top_log_probs(logits32: torch.Tensor, k: int) -> tuple[list[list[float]], list[list[int]]]:
    """Return the top-k float32 log-probs and token ids per row, best first (as lists).

    log_softmax is a per-row shift, so only the k winners are normalised, by the
    full-vocabulary logsumexp. Equal log-probs are ordered by token id (at the top-k's edge
    too), so the result does not depend on topk's tie order. Rows that are entirely -inf
    yield all -inf. Raises ValueError when a row holds NaN or +inf.
    """
    if logits32.device.type == "cpu":
        top, ids, log_norm = _top_log_probs_cpu(logits32.contiguous(), k)
    else:
        top, ids, log_norm = _top_log_probs_device(logits32, k)
    if bool(torch.isnan(log_norm).any()):
        raise ValueError("logits contain NaN")
    if bool(torch.isposinf(log_norm).any()):
        raise ValueError("logits contain +inf")
    log_probs = torch.where(top[:, :1] > -_INF, top - log_norm, -_INF)
    return log_probs.tolist(), ids.tolist()


def _build_visibility(parents: list[int], max_depth: int) -> torch.Tensor:
    """Return the ancestor-closure mask in one numpy step per depth: every node marks its
    j-th ancestor for j = 0 .. max_depth (the root is its own parent here)."""
    size = len(parents)
    up = np.array(parents, dtype=np.int64)
    up[0] = 0
    visibility = np.zeros((size, size), dtype=np.bool_)
    nodes = np.arange(size)
    ancestor = nodes
    for _ in range(max_depth + 1):
        visibility[nodes, ancestor] = True
        ancestor = up[ancestor]
    return torch.from_numpy(visibility)


def build_ddtree_tree_from_logits(logits: torch.Tensor, budget: int) -> DDTree:
    """Return the DDTree with at most `budget` nodes maximising the sum of prefix probabilities.

    logits: [L, V] draft logits for positions 1..L after the root (any float dtype/device).
    budget: draft nodes to add (>= 0); 0 gives a root-only tree.
    Best-first over prefixes: each pop takes the most probable remaining prefix,
    then offers its next sibling (same parent, next rank) and its first child
    (next depth, rank 0). Prefix probabilities shrink along a path, so the pops
    are the `budget` most probable prefixes and the set is prefix-closed.
    Ties break by (depth, rank, parent). -inf tokens never enter the tree.
    Raises ValueError on NaN or +inf logits, a non-2-D tensor or a negative budget.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must be [L, V], got shape {tuple(logits.shape)}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    num_depths, vocab_size = logits.shape
    parents = [-1]
    child_maps: list[dict[int, int]] = [{}]
    tokens: list[int] = []
    depths: list[int] = []
    scores: list[float] = []
    if num_depths > 0 and vocab_size > 0:
        # Run even for budget 0: the input check rides on the logsumexp.
        top_lp, top_ids = _top_log_probs(logits.float(), max(1, min(budget, vocab_size)))
        width = len(top_lp[0])
        neg_inf = -_INF
        push, pop = heapq.heappush, heapq.heappop
        # Heap entry: (-score, depth index, rank, parent node, parent score).
        heap: list[tuple[float, int, int, int, float]] = []
        if budget > 0 and top_lp[0][0] != neg_inf:
            heap.append((-top_lp[0][0], 0, 0, 0, 0.0))
        count = 0
        while heap and count < budget:
            neg_score, d, rank, parent, parent_score = pop(heap)
            count += 1
            token = top_ids[d][rank]
            parents.append(parent)
            child_maps.append({})
            child_maps[parent][token] = count
            tokens.append(token)
            depths.append(d + 1)
            scores.append(-neg_score)
            row = top_lp[d]
            if rank + 1 < width and row[rank + 1] != neg_inf:
                push(heap, (-(parent_score + row[rank + 1]), d, rank + 1, parent, parent_score))
            if d + 1 < num_depths and top_lp[d + 1][0] != neg_inf:
                push(heap, (neg_score - top_lp[d + 1][0], d + 1, 0, count, -neg_score))
    return DDTree(
        node_token_ids=torch.tensor(tokens, dtype=torch.long),
        depths=torch.tensor(depths, dtype=torch.long),
        prefix_log_probs=torch.tensor(scores, dtype=torch.float64),
        parents=parents,
        child_maps=child_maps,
        visibility=_build_visibility(parents, max(depths, default=0)),
    )


def follow_verified_tree(
    tree: DDTree, posterior: Sequence[int] | torch.Tensor
) -> tuple[list[int], int]:
    """Return (accepted node indices starting with root 0, bonus token).

    posterior: n + 1 target tokens, root first; posterior[i] is the target's
    next token after node i. Walk from the root into the child whose token
    equals the current node's posterior token; the first unmatched posterior
    token is the bonus.
    """
    post = posterior.tolist() if isinstance(posterior, torch.Tensor) else list(posterior)
    if len(post) != len(tree.parents):
        raise ValueError(f"posterior has {len(post)} entries, tree has {len(tree.parents)} nodes")
    accepted = [0]
    node = 0
    while True:
        child = tree.child_maps[node].get(int(post[node]))
        if child is None:
            return accepted, int(post[node])
        accepted.append(child)
        node = child


def compile_ddtree_tree(
    tree: DDTree,
    root_token: int,
    start_position: int,
    device: torch.device | None = None,
) -> CompiledDDTree:
    """Return verify ids, positions, ancestor mask and EAGLE layout for one tree.

    root_token: the committed bonus token at node 0.
    start_position: sequence position of the root; node i sits at start + depth.
    Children are linked in pop order, which is rank order within one parent.
    """
    size = len(tree.parents)
    next_token = [-1] * size
    next_sibling = [-1] * size
    last_child = [-1] * size
    for node in range(1, size):
        parent = tree.parents[node]
        if last_child[parent] < 0:
            next_token[parent] = node
        else:
            next_sibling[last_child[parent]] = node
        last_child[parent] = node
    root = torch.tensor([root_token], dtype=torch.long)
    zero = torch.zeros(1, dtype=torch.long)
    compiled = CompiledDDTree(
        input_ids=torch.cat([root, tree.node_token_ids]),
        positions=torch.cat([zero, tree.depths]) + start_position,
        attention_mask=tree.visibility.clone(),
        retrieve_index=torch.arange(size, dtype=torch.long),
        retrieve_next_token=torch.tensor(next_token, dtype=torch.long),
        retrieve_next_sibling=torch.tensor(next_sibling, dtype=torch.long),
    )
    if device is None:
        return compiled
    return CompiledDDTree(**{k: v.to(device) for k, v in vars(compiled).items()})


def stack_compiled_ddtrees(
    trees: Sequence[CompiledDDTree],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (next_token, next_sibling, node_tokens), each [B, max n + 1], padded.

    Padded slots get -1 links and token -1, are unreachable from the root, and
    never use 0 (a real token id) as a sentinel.
    """
    width = max(int(t.input_ids.numel()) for t in trees)

    def pad(rows: list[torch.Tensor]) -> torch.Tensor:
        out = torch.full((len(rows), width), -1, dtype=torch.long, device=rows[0].device)
        for b, row in enumerate(rows):
            out[b, : row.numel()] = row
        return out

    return (
        pad([t.retrieve_next_token for t in trees]),
        pad([t.retrieve_next_sibling for t in trees]),
        pad([t.input_ids for t in trees]),
    )


def _parents_from_links(next_token: torch.Tensor, next_sibling: torch.Tensor) -> torch.Tensor:
    """Return parents [B, N] from first-child/next-sibling links (-1 for none).

    Each node's sibling-chain head is found by pointer jumping (log2 N rounds),
    then the head's parent is the node that names it as first child.
    """
    batch, size = next_token.shape
    device = next_token.device
    # One scratch column at index `size` absorbs writes for -1 links.
    sink = torch.full((batch, 1), size, dtype=torch.long, device=device)
    prev = torch.full((batch, size + 1), -1, dtype=torch.long, device=device)
    nodes = torch.arange(size, device=device).expand(batch, size)
    prev.scatter_(1, torch.where(next_sibling >= 0, next_sibling, sink.expand(batch, size)), nodes)
    head = torch.where(prev[:, :size] >= 0, prev[:, :size], nodes)
    jump = torch.cat([head, sink], dim=1)
    for _ in range(max(1, size.bit_length())):
        jump = torch.gather(jump, 1, jump)
    head = jump[:, :size]
    first_parent = torch.full((batch, size + 1), -1, dtype=torch.long, device=device)
    first_parent.scatter_(
        1, torch.where(next_token >= 0, next_token, sink.expand(batch, size)), nodes
    )
    return torch.gather(first_parent, 1, head)


def follow_verified_trees_batched(
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    node_tokens: torch.Tensor,
    posterior: torch.Tensor,
    max_depth: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Walk B verified trees at once; return (accept_index, accept_length, bonus).

    Inputs are [B, N + 1] int64 on one device: EAGLE-layout links, node tokens
    (root at 0) and the target's token at every node. max_depth bounds the walk
    (default N); one vectorised step per depth, no per-node Python loop.
    accept_index: [B, max_depth + 1] local node indices from the root, -1 padded.
    accept_length: [B] accepted draft nodes (root excluded), as sglang's accept_token_num.
    bonus: [B] the target's token at the last accepted node.
    """
    batch, size = node_tokens.shape
    depth_cap = size - 1 if max_depth is None else max_depth
    device = node_tokens.device
    parents = _parents_from_links(next_token, next_sibling)
    current = torch.zeros(batch, dtype=torch.long, device=device)
    active = torch.ones(batch, dtype=torch.bool, device=device)
    accept_index = torch.full((batch, depth_cap + 1), -1, dtype=torch.long, device=device)
    accept_index[:, 0] = 0
    accept_length = torch.zeros(batch, dtype=torch.long, device=device)
    for depth in range(1, depth_cap + 1):
        if device.type == "cpu" and not bool(active.any()):
            break  # free on the host; on an accelerator this would force a sync
        wanted = torch.gather(posterior, 1, current[:, None])
        match = (parents == current[:, None]) & (node_tokens == wanted) & active[:, None]
        found = match.any(dim=1)
        child = torch.argmax(match.to(torch.int8), dim=1)
        active = active & found
        current = torch.where(active, child, current)
        accept_index[:, depth] = torch.where(active, child, torch.full_like(child, -1))
        accept_length += active.long()
    bonus = torch.gather(posterior, 1, current[:, None]).squeeze(1)
    return accept_index, accept_length, bonus
