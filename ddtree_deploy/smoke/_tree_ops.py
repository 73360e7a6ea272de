"""SGLang 0.5.23's tree kernels called the way a DDTree worker would call them, with the
buffers sglang's EAGLE code allocates (eagle_utils.py), plus the dense references they are
checked against. Torch + triton + an installed sglang (see _sglang_kernels.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from _sglang_kernels import Kernels, as_kernel_input
from _uno_mapping import tree_from_uno_row


@dataclass(frozen=True)
class TreeLinks:
    """What build_tree_kernel_efficient writes for a batch of B trees of width Q.

    mask: bool, FULL_MASK layout (per request Q rows of seq_len + Q, requests back to back)
    or QLEN_ONLY ([B, Q, Q] flattened). positions: [B * Q]. retrieve_*: [B, Q].
    """

    mask: torch.Tensor
    positions: torch.Tensor
    retrieve_index: torch.Tensor
    next_token: torch.Tensor
    next_sibling: torch.Tensor


def build_uno(
    kernels: Kernels,
    roots: torch.Tensor,
    logits: torch.Tensor,
    budget: int,
    candidate_top_k: int,
    temperature: float = 1.0,
):
    """Return (proposal, [TreeNodes per request]) from `build_uno_tree_proposal`.

    roots: [B] int64; logits: [B, L, V] draft logits for depths 1..L; budget: draft nodes
    (the verify width Q is budget + 1).
    """
    proposal = kernels.uno.build_uno_tree_proposal(
        as_kernel_input(roots),
        as_kernel_input(logits),
        max_nodes=budget + 1,
        candidate_top_k=candidate_top_k,
        temperature=temperature,
    )
    trees = [
        tree_from_uno_row(
            proposal.draft_tokens[b].cpu(), proposal.top_scores_index[b].cpu(), candidate_top_k
        )
        for b in range(roots.numel())
    ]
    return proposal, trees


def build_tree_links(
    kernels: Kernels,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    seq_lens: torch.Tensor,
    candidate_top_k: int,
    depth: int,
    full_mask: bool = True,
    cuda_kernel: bool = False,
) -> TreeLinks:
    """Run build_tree_kernel_efficient (the Triton kernel; `cuda_kernel` picks sglang's JIT
    CUDA one, what CUDA hosts run) with eagle_utils.py's buffers: mask pre-filled True
    (the kernel never writes the prefix columns), retrieve buffers -1.

    parent_list: [B, W]; top_scores_index: [B, Q - 1]; seq_lens: [B] int64 KV-ready lengths
    (the root's position); depth: spec_steps, the deepest level the mask walk follows.
    """
    spec_tree = kernels.spec_tree
    batch, width = top_scores_index.shape[0], top_scores_index.shape[1] + 1
    device = top_scores_index.device
    if full_mask:
        size = int(seq_lens.sum()) * width + width * width * batch
        mode = spec_tree.TreeMaskMode.FULL_MASK
    else:
        size = batch * width * width
        mode = spec_tree.TreeMaskMode.QLEN_ONLY
    mask = torch.full((size,), True, dtype=torch.bool, device=device)
    retrieve = torch.full((3, batch, width), -1, dtype=torch.long, device=device)
    positions = torch.empty(batch * width, dtype=torch.long, device=device)
    run = (
        spec_tree.build_tree_kernel_efficient_func
        if cuda_kernel
        else spec_tree.sgl_build_tree_kernel_triton
    )
    run(
        parent_list,
        top_scores_index,
        seq_lens,
        mask,
        positions,
        retrieve[0],
        retrieve[1],
        retrieve[2],
        candidate_top_k,
        depth,
        width,
        mode,
    )
    return TreeLinks(mask, positions, retrieve[0], retrieve[1], retrieve[2])


def tree_block(links: TreeLinks, seq_lens: list[int], width: int, request: int) -> torch.Tensor:
    """Return request `request`'s [Q, seq_len + Q] rows of a FULL_MASK mask."""
    start = sum(seq_len * width + width * width for seq_len in seq_lens[:request])
    cols = seq_lens[request] + width
    return links.mask[start : start + width * cols].view(width, cols)


def verify_greedy(
    kernels: Kernels,
    candidates: torch.Tensor,
    links: TreeLinks,
    target_predict: torch.Tensor,
    max_depth: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run verify_tree_greedy_triton with eagle_utils.py's buffers; return (predicts [B * Q],
    accept_index [B, max_depth + 1] global slots, -1 padded, accept_token_num [B])."""
    batch, width = candidates.shape
    device = candidates.device
    predicts = torch.zeros(batch * width, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, max_depth + 1), -1, dtype=torch.int32, device=device)
    accept_num = torch.empty(batch, dtype=torch.int32, device=device)
    kernels.spec_tree.verify_tree_greedy_triton(
        predicts,
        accept_index,
        accept_num,
        candidates,
        links.retrieve_index,
        links.next_token,
        links.next_sibling,
        target_predict,
    )
    return predicts, accept_index, accept_num


def extend_attention(
    kernels: Kernels,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    prefix_slots: list[torch.Tensor],
    extend_lens: list[int],
    custom_mask: torch.Tensor | None,
) -> torch.Tensor:
    """Run extend_attention_fwd (TARGET_VERIFY style: custom mask over prefix + extend,
    prefix part not read) and return o [T, H, D].

    q/k/v: [T, H(kv), D] extend tokens of all requests back to back; k/v_buffer: the KV pool
    [slots, H_kv, D]; prefix_slots: per request the pool slots of its prefix; custom_mask:
    flat FULL_MASK layout, or None for plain causal extend (the negative control).
    """
    device = q.device
    batch = len(extend_lens)
    qo_indptr = torch.zeros(batch + 1, dtype=torch.int32, device=device)
    qo_indptr[1:] = torch.cumsum(torch.tensor(extend_lens, device=device), 0)
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int32, device=device)
    kv_indptr[1:] = torch.cumsum(torch.tensor([s.numel() for s in prefix_slots], device=device), 0)
    kv_indices = torch.cat(prefix_slots).to(torch.int64)
    sizes = [(s.numel() + e) * e for s, e in zip(prefix_slots, extend_lens, strict=True)]
    mask_indptr = torch.zeros(batch + 1, dtype=torch.int64, device=device)
    mask_indptr[1:] = torch.cumsum(torch.tensor(sizes, device=device), 0)
    out = torch.empty_like(q)
    kernels.extend_attention_fwd(
        q,
        k,
        v,
        out,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        custom_mask,
        custom_mask is None,
        mask_indptr,
        max(extend_lens),
        1.0,
        1.0,
    )
    return out


def dense_attention(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor
) -> torch.Tensor:
    """Torch SDPA reference: q [Tq, H, D], keys/values [Tk, H, D], visible [Tq, Tk] bool."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1).float(),
        keys.transpose(0, 1).float(),
        values.transpose(0, 1).float(),
        attn_mask=visible,
    )
    return out.transpose(0, 1).to(q.dtype)
