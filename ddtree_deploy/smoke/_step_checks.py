"""Checks (b) mask/positions/links, (c) masked extend attention, (d) greedy verify and
(e) accepted-KV slots: SGLang's kernels against our compile and walk and torch SDPA."""

from __future__ import annotations

import time

import _tree_ops as tree_ops
import torch
from _kernel_plan import record
from _uno_mapping import uno_layout_from_tree


def random_trees(kernels, oracle, gen, device, batch, depths, vocab, budget):
    """Return (K, roots, proposal, [our DDTree per request]), UNO's K = min(budget, V)."""
    logits = torch.randn(batch, depths, vocab, generator=gen) * 2.0
    roots = torch.randint(0, vocab, (batch,), generator=gen)
    top_k = min(budget, vocab)
    proposal, _ = tree_ops.build_uno(kernels, roots.to(device), logits.to(device), budget, top_k)
    ours = [oracle.build_ddtree_tree_from_logits(logits[b], budget) for b in range(batch)]
    return top_k, roots, proposal, ours


def links_match(links, ours_compiled, seq_lens, width, full_mask=True) -> bool:
    """True when the kernel's mask, positions and links equal our compile's, per request."""
    ok = True
    for b, compiled in enumerate(ours_compiled):
        if full_mask:
            block = tree_ops.tree_block(links, seq_lens, width, b).cpu()
            ok &= bool(block[:, : seq_lens[b]].all())
            tree_part = block[:, seq_lens[b] :]
        else:
            tree_part = links.mask.view(-1, width, width)[b].cpu()
        ok &= torch.equal(tree_part, compiled.attention_mask)
        ok &= torch.equal(links.positions.view(-1, width)[b].cpu(), compiled.positions)
        ok &= torch.equal(links.retrieve_index[b].cpu(), compiled.retrieve_index + b * width)
        ok &= torch.equal(links.next_token[b].cpu(), compiled.retrieve_next_token)
        ok &= torch.equal(links.next_sibling[b].cpu(), compiled.retrieve_next_sibling)
    return ok


def check_tree_links(kernels, oracle, device, quick) -> dict:
    """(b) build_tree_kernel_efficient on UNO's proposal, and on OUR tree through
    uno_layout_from_tree, equals our compile (mask, positions, links); both mask modes."""
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(17)
    ok, cases = True, 0
    cuda = [False, True] if device == "cuda" else [False]
    for depths, vocab, budget in [(3, 30, 8), (4, 100, 20), (6, 64, 40)]:
        batch = 3
        _, roots, proposal, ours = random_trees(
            kernels, oracle, gen, device, batch, depths, vocab, budget
        )
        seq_lens = [int(x) for x in torch.randint(1, 40, (batch,), generator=gen)]
        compiled = [
            oracle.compile_ddtree_tree(t, int(roots[b]), seq_lens[b]) for b, t in enumerate(ours)
        ]
        lens = torch.tensor(seq_lens, dtype=torch.long, device=device)
        for cuda_kernel in cuda:
            for full in (True, False):
                links = tree_ops.build_tree_links(
                    kernels,
                    proposal.parent_list,
                    proposal.top_scores_index,
                    lens,
                    budget,
                    depths,
                    full,
                    cuda_kernel,
                )
                ok &= links_match(links, compiled, seq_lens, budget + 1, full)
                cases += batch
        # Our own tree through the inverse mapping (K = budget, parent list for L depths).
        layouts = [
            uno_layout_from_tree(t.node_token_ids.tolist(), t.parents, budget, depths) for t in ours
        ]
        parent_list = torch.stack([x[2] for x in layouts]).to(device)
        edges = torch.stack([x[1] for x in layouts]).to(device)
        links = tree_ops.build_tree_links(kernels, parent_list, edges, lens, budget, depths)
        ok &= links_match(links, compiled, seq_lens, budget + 1)
        ok &= torch.equal(torch.stack([x[0] for x in layouts]), proposal.draft_tokens.cpu())
        cases += batch
    # Negative controls: one edge pointing at the wrong parent; spec_steps one short.
    wrong_edges = edges.clone()
    deep = int(torch.nonzero(torch.tensor([d > 1 for d in ours[0].depths.tolist()]))[0])
    wrong_edges[0, deep] = 0  # the root's child of rank 0
    wrong = tree_ops.build_tree_links(kernels, parent_list, wrong_edges, lens, budget, depths)
    short = tree_ops.build_tree_links(kernels, parent_list, edges, lens, budget, depths - 4)
    caught = not links_match(wrong, compiled, seq_lens, budget + 1) and not links_match(
        short, compiled, seq_lens, budget + 1
    )
    return record("tree_links", started, ok, caught, cases, cuda_kernel=device == "cuda")


def planted_posterior(compiled, gen, vocab) -> torch.Tensor:
    """Target tokens per node: random, but along one random root-to-node path the target
    picks the path's next token, so the walk accepts that path (or more)."""
    size = compiled.input_ids.numel()
    post = torch.randint(0, vocab, (size,), generator=gen)
    node = int(torch.randint(0, size, (1,), generator=gen))
    parents = [-1] * size
    for parent in range(size):
        child = int(compiled.retrieve_next_token[parent])
        while child >= 0:
            parents[child] = parent
            child = int(compiled.retrieve_next_sibling[child])
    while parents[node] >= 0:
        post[parents[node]] = compiled.input_ids[node]
        node = parents[node]
    return post


def check_verify(kernels, oracle, device, quick) -> dict:
    """(d) verify_tree_greedy_triton accepts exactly our walk's path and bonus."""
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(18)
    ok, cases, accepted = True, 0, []
    for depths, vocab, budget in [(3, 6, 8), (5, 8, 24), (8, 6, 40)]:
        batch = 4
        top_k, roots, proposal, ours = random_trees(
            kernels, oracle, gen, device, batch, depths, vocab, budget
        )
        compiled = [oracle.compile_ddtree_tree(t, int(roots[b]), 5) for b, t in enumerate(ours)]
        lens = torch.full((batch,), 5, dtype=torch.long, device=device)
        links = tree_ops.build_tree_links(
            kernels, proposal.parent_list, proposal.top_scores_index, lens, top_k, depths
        )
        post = torch.stack([planted_posterior(c, gen, vocab) for c in compiled])
        candidates = torch.cat([roots[:, None], proposal.draft_tokens.cpu()], 1).to(device)
        predicts, accept_index, accept_num = tree_ops.verify_greedy(
            kernels, candidates, links, post.to(device), depths
        )
        width = budget + 1
        for b, tree in enumerate(ours):
            path, bonus = oracle.follow_verified_tree(tree, post[b])
            got = [int(x) - b * width for x in accept_index[b].tolist()[: int(accept_num[b]) + 1]]
            last = int(accept_index[b, int(accept_num[b])])
            ok &= got == path and int(predicts[last]) == bonus
            ok &= all(int(x) == -1 for x in accept_index[b].tolist()[int(accept_num[b]) + 1 :])
            accepted.append(len(path) - 1)
            cases += 1
    # Negative control: the target's tokens read one node off (as a shifted logits row).
    shifted = torch.roll(post, 1, dims=1).to(device)
    _, bad_index, bad_num = tree_ops.verify_greedy(kernels, candidates, links, shifted, depths)
    caught = any(
        int(bad_num[b]) != len(oracle.follow_verified_tree(t, post[b])[0]) - 1
        for b, t in enumerate(ours)
    )
    return record("verify_greedy", started, ok, caught, cases, accept_lengths=accepted)


def check_attention(kernels, oracle, device, quick) -> dict:
    """(c) extend_attention_fwd with build_tree's FULL_MASK equals dense SDPA with the
    prefix + our ancestor mask; 3 requests of different prefix lengths, KV in shuffled
    pool slots. Without the tree kernels (0.5.13.post1) the mask comes from our compile."""
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(19)
    dtype = torch.float32
    heads, dim, batch, depths, vocab, budget = 2, 32, 3, 4, 40, 14
    logits = torch.randn(batch, depths, vocab, generator=gen) * 2.0
    ours = [oracle.build_ddtree_tree_from_logits(logits[b], budget) for b in range(batch)]
    prefix = [5, 17, 70]
    width = budget + 1
    masks = []
    for b, tree in enumerate(ours):
        full = torch.ones(width, prefix[b] + width, dtype=torch.bool)
        full[:, prefix[b] :] = tree.visibility
        masks.append(full.flatten())
    flat_mask = torch.cat(masks).to(device)
    if kernels.spec_tree is not None:  # the mask from sglang's own kernel, checked equal
        lens = torch.tensor(prefix, dtype=torch.long, device=device)
        layouts = [
            uno_layout_from_tree(t.node_token_ids.tolist(), t.parents, budget, depths) for t in ours
        ]
        links = tree_ops.build_tree_links(
            kernels,
            torch.stack([x[2] for x in layouts]).to(device),
            torch.stack([x[1] for x in layouts]).to(device),
            lens,
            budget,
            depths,
        )
        assert torch.equal(links.mask, flat_mask), "build_tree's mask is not our compile's"
        flat_mask = links.mask
    pool = sum(prefix) + 16
    k_buffer = torch.randn(pool, heads, dim, generator=gen).to(device, dtype)
    v_buffer = torch.randn(pool, heads, dim, generator=gen).to(device, dtype)
    slots = torch.randperm(pool, generator=gen)
    prefix_slots, start = [], 0
    for length in prefix:
        prefix_slots.append(slots[start : start + length].to(device))
        start += length
    q = torch.randn(batch * width, heads, dim, generator=gen).to(device, dtype)
    k = torch.randn(batch * width, heads, dim, generator=gen).to(device, dtype)
    v = torch.randn(batch * width, heads, dim, generator=gen).to(device, dtype)

    def reference() -> torch.Tensor:
        outs = []
        for b in range(batch):
            rows = slice(b * width, (b + 1) * width)
            keys = torch.cat([k_buffer[prefix_slots[b]], k[rows]])
            values = torch.cat([v_buffer[prefix_slots[b]], v[rows]])
            visible = masks[b].view(width, -1).to(device)
            outs.append(tree_ops.dense_attention(q[rows], keys, values, visible))
        return torch.cat(outs)

    got = tree_ops.extend_attention(
        kernels, q, k, v, k_buffer, v_buffer, prefix_slots, [width] * batch, flat_mask
    )
    expected = reference()
    error = float((got - expected).abs().max())
    causal = tree_ops.extend_attention(
        kernels, q, k, v, k_buffer, v_buffer, prefix_slots, [width] * batch, None
    )
    control_error = float((causal - expected).abs().max())
    tolerance = 2e-3 if device == "cuda" else 1e-5  # tf32 dots on a GPU
    return record(
        "attention",
        started,
        error < tolerance,
        control_error > 100 * tolerance,
        batch,
        max_abs_error=error,
        dropped_mask_error=control_error,
    )


def check_accepted_kv(kernels, oracle, device, quick) -> dict:
    """(e) fill_accept_out_cache_loc turns accept_index into the accepted nodes' KV slots in
    path order, request after request: what the next step's req_to_token appends. No KV is
    copied in sglang 0.5.23 at page size 1 (there is no move kernel: slots are remapped)."""
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(20)
    batch, width, depth = 4, 9, 5
    out_cache_loc = torch.randperm(200, generator=gen)[: batch * width].to(device)
    accept_index = torch.full((batch, depth + 1), -1, dtype=torch.int32)
    want = []
    for b in range(batch):
        length = int(torch.randint(1, depth + 2, (1,), generator=gen))
        nodes = [0] + sorted(torch.randperm(width - 1, generator=gen)[: length - 1].add(1).tolist())
        accept_index[b, :length] = torch.tensor(nodes, dtype=torch.int32) + b * width
        want += [int(out_cache_loc[b * width + n]) for n in nodes]
    flat = accept_index.flatten().to(device)
    got = torch.full((len(want),), -1, dtype=out_cache_loc.dtype, device=device)
    kernels.eagle.fill_accept_out_cache_loc_func(flat, out_cache_loc, got, flat.numel())
    ok = got.cpu().tolist() == want
    # Negative control: accept_index holding local (not batch-global) node indices.
    local = (accept_index - torch.arange(batch, dtype=torch.int32)[:, None] * width).clamp(min=-1)
    local = torch.where(accept_index >= 0, local, accept_index).flatten().to(device)
    bad = torch.full((len(want),), -1, dtype=out_cache_loc.dtype, device=device)
    kernels.eagle.fill_accept_out_cache_loc_func(local, out_cache_loc, bad, local.numel())
    return record("accepted_kv_slots", started, ok, bad.cpu().tolist() != want, batch)


CHECKS = {
    "tree_links": check_tree_links,
    "verify_greedy": check_verify,
    "attention": check_attention,
    "accepted_kv_slots": check_accepted_kv,
}
