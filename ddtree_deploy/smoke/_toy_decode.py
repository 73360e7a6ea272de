"""(f) A toy decode loop through SGLang 0.5.23's kernels equals plain greedy decoding.

Target: a random one-layer attention model (token + absolute position embeddings, so a wrong
position changes its output). Plain greedy: the full causal forward per token (torch SDPA).
Speculative: an oracle draft that knows the greedy continuation at some depths and is wrong
at others -> UNO tree -> build_tree_kernel_efficient (mask, positions, links) -> the
target's verify forward through extend_attention_fwd with the tree mask, reading the prefix
KV from a pool through req_to_token -> verify_tree_greedy -> fill_accept_out_cache_loc (the
accepted nodes' slots become the next step's prefix; the others are dropped).
"""

from __future__ import annotations

import time

import _tree_ops as tree_ops
import torch
from _kernel_plan import record

VOCAB, HEADS, HEAD_DIM, MAX_POS = 32, 2, 16, 256


class ToyTarget:
    """A random one-layer attention LM; weights from `seed`."""

    def __init__(self, seed: int, device: str) -> None:
        gen = torch.Generator().manual_seed(seed)
        width = HEADS * HEAD_DIM

        def weight(*shape: int) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) / shape[0] ** 0.5).to(device)

        self.embed = torch.randn(VOCAB, width, generator=gen).to(device)
        self.pos = torch.randn(MAX_POS, width, generator=gen).to(device)
        self.wq, self.wk, self.wv, self.wo = (weight(width, width) for _ in range(4))
        self.head = weight(width, VOCAB) * 4.0

    def qkv(self, tokens: torch.Tensor, positions: torch.Tensor):
        """Return (x, q, k, v) for tokens at positions; q/k/v are [T, H, D]."""
        x = self.embed[tokens] + self.pos[positions]
        return (x, *((x @ w).view(-1, HEADS, HEAD_DIM) for w in (self.wq, self.wk, self.wv)))

    def logits(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """Return [T, V] logits from the residual x and the attention output [T, H, D]."""
        return (x + attended.reshape(x.shape[0], -1) @ self.wo) @ self.head

    def greedy(self, prompt: list[int], new_tokens: int) -> list[int]:
        """Plain greedy decoding: the whole causal forward once per new token."""
        tokens = list(prompt)
        for _ in range(new_tokens):
            ids = torch.tensor(tokens, device=self.embed.device)
            x, q, k, v = self.qkv(ids, torch.arange(len(tokens), device=ids.device))
            causal = torch.ones(
                len(tokens), len(tokens), dtype=torch.bool, device=ids.device
            ).tril()
            tokens.append(
                int(self.logits(x, tree_ops.dense_attention(q, k, v, causal))[-1].argmax())
            )
        return tokens[len(prompt) :]


def oracle_logits(gen, truth: list[list[int]], depths: int) -> torch.Tensor:
    """Draft logits [B, L, V]: at each depth right (the true next token on top) with
    probability 0.6, else a random wrong token on top and the truth second."""
    logits = torch.randn(len(truth), depths, VOCAB, generator=gen)
    for b, future in enumerate(truth):
        for d in range(min(depths, len(future))):
            right = bool(torch.rand(1, generator=gen) < 0.6)
            logits[b, d, future[d]] += 6.0 if right else 4.0
            if not right:
                logits[b, d, int(torch.randint(0, VOCAB, (1,), generator=gen))] += 5.0
    return logits


def speculative_decode(
    kernels, target, prompts, new_tokens, depths, budget, device, position_shift=0, seed=0
):
    """Return (per-request tokens, mean accept length) decoded through the kernels."""
    gen = torch.Generator().manual_seed(seed)
    refs = [target.greedy(p, new_tokens + depths + 1) for p in prompts]
    batch, width, top_k = len(prompts), budget + 1, min(budget, VOCAB)
    pool_k = torch.zeros(4096, HEADS, HEAD_DIM, device=device)
    pool_v = torch.zeros_like(pool_k)
    free = iter(range(4096))
    # Prefill: the prompt minus its last token into the pool (plain causal forward).
    req_to_token, committed = [], [list(p) for p in prompts]
    for prompt in prompts:
        slots = torch.tensor([next(free) for _ in prompt[:-1]], device=device)
        _, _, k, v = target.qkv(
            torch.tensor(prompt[:-1], device=device), torch.arange(len(prompt) - 1, device=device)
        )
        pool_k[slots], pool_v[slots] = k, v
        req_to_token.append(slots)
    steps = accepted = 0
    while min(len(c) - len(p) for c, p in zip(committed, prompts, strict=True)) < new_tokens:
        truth = [refs[b][len(committed[b]) - len(prompts[b]) :] for b in range(batch)]
        roots = torch.tensor([c[-1] for c in committed], device=device)
        proposal, _ = tree_ops.build_uno(
            kernels, roots, oracle_logits(gen, truth, depths).to(device), budget, top_k
        )
        seq_lens = [int(s.numel()) for s in req_to_token]
        links = tree_ops.build_tree_links(
            kernels,
            proposal.parent_list,
            proposal.top_scores_index,
            torch.tensor(seq_lens, device=device),
            top_k,
            depths,
        )
        candidates = torch.cat([roots[:, None], proposal.draft_tokens], 1)
        x, q, k, v = target.qkv(candidates.flatten(), links.positions + position_shift)
        out_cache_loc = torch.tensor([next(free) for _ in range(batch * width)], device=device)
        pool_k[out_cache_loc], pool_v[out_cache_loc] = k, v
        attended = tree_ops.extend_attention(
            kernels, q, k, v, pool_k, pool_v, req_to_token, [width] * batch, links.mask
        )
        target_predict = target.logits(x, attended).argmax(-1).view(batch, width)
        predicts, accept_index, accept_num = tree_ops.verify_greedy(
            kernels, candidates, links, target_predict, depths
        )
        kept = int(accept_num.sum()) + batch
        slots = torch.full((kept,), -1, dtype=out_cache_loc.dtype, device=device)
        flat = accept_index.flatten()
        kernels.eagle.fill_accept_out_cache_loc_func(flat, out_cache_loc, slots, flat.numel())
        start = 0
        for b in range(batch):
            count = int(accept_num[b]) + 1
            path = accept_index[b, :count].long()
            committed[b] += candidates.flatten()[path[1:]].tolist() + [int(predicts[path[-1]])]
            req_to_token[b] = torch.cat([req_to_token[b], slots[start : start + count]])
            start += count
        steps += 1
        accepted += int(accept_num.sum()) + batch
    outs = [c[len(p) : len(p) + new_tokens] for c, p in zip(committed, prompts, strict=True)]
    return outs, [r[:new_tokens] for r in refs], accepted / (steps * batch)


def check_toy_decode(kernels, oracle, device, quick) -> dict:
    """(f) batch 1 and 8, width = block (budget = L) and wider (3 L): token for token equal
    to plain greedy; control: positions shifted by one."""
    del oracle
    started = time.perf_counter()
    target = ToyTarget(21, device)
    gen = torch.Generator().manual_seed(22)
    prompts = [
        torch.randint(0, VOCAB, (int(n),), generator=gen).tolist()
        for n in torch.randint(3, 12, (8,), generator=gen)
    ]
    depths, new_tokens, ok, runs = 4, 16, True, {}
    for batch in (1, 8):
        for budget in (depths, 3 * depths):
            outs, refs, accept = speculative_decode(
                kernels, target, prompts[:batch], new_tokens, depths, budget, device
            )
            ok &= outs == refs
            runs[f"b{batch}_budget{budget}"] = {
                "equal": outs == refs,
                "accept_length": round(accept, 2),
            }
    outs, refs, _ = speculative_decode(
        kernels, target, prompts[:1], new_tokens, depths, depths, device, 1
    )
    return record(
        "toy_decode",
        started,
        ok,
        outs != refs,
        len(runs),
        new_tokens=new_tokens,
        runs=runs,
    )


CHECKS = {"toy_decode": check_toy_decode}
