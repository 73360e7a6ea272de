"""CPU tests of the worker-side DDTree logic shipped in ddtree 1.1.0 (ddtree_worker_utils.py).

Every function is checked against a straightforward reference on random batches
(mixed tree sizes included). `test_simulated_verify_step_*` runs one whole decode
step on a toy target: the mask and positions show each node exactly its own path,
the greedy walk commits what greedy decoding would, and the remapped KV slots hold
the committed tokens at their positions. Sampling is checked to be lossless.
"""

from __future__ import annotations

import pytest
import torch

from tests.support import REPO, load_module, load_smoke_script, patchset_file

DDTREE_110 = REPO / "patchsets/ddtree/1.1.0"
PAYLOAD = "sglang/srt/speculative"


tree_utils = load_module(
    "_payload110_ddtree_utils", patchset_file(DDTREE_110, f"{PAYLOAD}/ddtree_utils.py")
)
wu = load_module(
    "_payload110_ddtree_worker_utils",
    patchset_file(DDTREE_110, f"{PAYLOAD}/ddtree_worker_utils.py"),
)
# 1.1.9, 1.1.11 and 1.1.12 ship the same worker files with faster tree builders: the simulated
# verify step runs on every builder.
BUILDERS = {
    "1.1.0": tree_utils,
    "1.1.9": load_module(
        "_payload119_ddtree_utils",
        patchset_file(REPO / "patchsets/ddtree/1.1.9", f"{PAYLOAD}/ddtree_utils.py"),
    ),
    "1.1.11": load_module(
        "_payload1111_ddtree_utils",
        patchset_file(REPO / "patchsets/ddtree/1.1.11", f"{PAYLOAD}/ddtree_utils.py"),
    ),
    "1.1.12": load_module(
        "_payload1112_ddtree_utils",
        patchset_file(REPO / "patchsets/ddtree/1.1.12", f"{PAYLOAD}/ddtree_utils.py"),
    ),
}


def random_trees(seed: int, budgets: list[int], depths: int = 5, vocab: int = 9):
    """Return (trees, compiled, roots, prefixes) for one random batch; roots are never 0."""
    gen = torch.Generator().manual_seed(seed)
    trees, compiled, roots, prefixes = [], [], [], []
    for budget in budgets:
        tree = tree_utils.build_ddtree_tree_from_logits(
            torch.randn(depths, vocab, generator=gen) * 3, budget
        )
        root = int(torch.randint(1, vocab, (1,), generator=gen))
        prefix = int(torch.randint(0, 30, (1,), generator=gen))
        trees.append(tree)
        compiled.append(tree_utils.compile_ddtree_tree(tree, root, prefix))
        roots.append(root)
        prefixes.append(prefix)
    return trees, compiled, roots, prefixes


def path_to(parents: list[int], node: int) -> list[int]:
    """Return the nodes from the root to `node`, both included."""
    path = [node]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path[::-1]


MIXED_BUDGETS = [0, 1, 7, 3, 12, 5]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pack_matches_reference_layout(seed: int) -> None:
    trees, compiled, roots, prefixes = random_trees(seed, MIXED_BUDGETS)
    width = max(MIXED_BUDGETS) + 1
    packed = wu.pack_ddtree_verify_batch(compiled, width)
    ids = packed.input_ids.view(len(trees), width)
    pos = packed.positions.view(len(trees), width)
    for b, tree in enumerate(trees):
        size = len(tree.parents)
        tokens = [roots[b], *tree.node_token_ids.tolist()]
        depths = [0, *tree.depths.tolist()]
        assert packed.num_nodes[b] == size
        assert ids[b].tolist() == tokens + [roots[b]] * (width - size)
        assert pos[b].tolist() == [prefixes[b] + d for d in depths] + [prefixes[b]] * (width - size)
        assert packed.walk_tokens[b].tolist() == tokens + [-1] * (width - size)
        for q in range(width):
            seen = set(path_to(tree.parents, q)) if q < size else {q}
            assert [k for k in range(width) if packed.tree_mask[b, q, k]] == sorted(seen)
        first_child, next_sibling = [-1] * width, [-1] * width
        for node in range(size):  # links: first child, then siblings in node order
            kids = [c for c in range(1, size) if tree.parents[c] == node]
            first_child[node] = kids[0] if kids else -1
            for left, right in zip(kids, kids[1:], strict=False):
                next_sibling[left] = right
        assert packed.next_token[b].tolist() == first_child
        assert packed.next_sibling[b].tolist() == next_sibling
    assert packed.max_depth == max(int(t.depths.max()) for t in trees if t.num_nodes)
    padding = torch.arange(width)[None, :] >= packed.num_nodes[:, None]
    assert (ids[padding] != 0).all(), "token 0 used as a padding sentinel"


def test_pack_rejects_tree_wider_than_width() -> None:
    _, compiled, _, _ = random_trees(3, [6])
    with pytest.raises(ValueError, match="expected 1..4"):
        wu.pack_ddtree_verify_batch(compiled, 4)


def test_custom_mask_matches_reference() -> None:
    trees, compiled, _, prefixes = random_trees(4, MIXED_BUDGETS)
    width = 13
    packed = wu.pack_ddtree_verify_batch(compiled, width)
    flat = wu.build_ddtree_custom_mask(packed.tree_mask, prefixes)
    expected = []
    for b, prefix in enumerate(prefixes):
        for q in range(width):
            for k in range(prefix + width):
                expected.append(k < prefix or bool(packed.tree_mask[b, q, k - prefix]))
    assert flat.dtype == torch.bool and flat.tolist() == expected


def test_draft_logits_are_hidden_after_root_times_head() -> None:
    gen = torch.Generator().manual_seed(5)
    hidden, weight = torch.randn(3, 6, 8, generator=gen), torch.randn(11, 8, generator=gen)
    logits = wu.compute_draft_logits(hidden, weight)
    for b in range(3):
        for d in range(5):
            ref = torch.stack([hidden[b, d + 1] @ weight[v] for v in range(11)])
            torch.testing.assert_close(logits[b, d], ref)


def reference_filtered_probs(row: torch.Tensor, temp: float, k: int, p: float, min_p: float):
    """Return the target's sampling distribution for one row: top-k, top-p, min-p."""
    probs = torch.softmax(row.double() / temp, -1)
    order = torch.argsort(probs, descending=True, stable=True).tolist()
    kept = order[: k if 0 < k < len(order) else len(order)]
    mass = probs[kept].sum()
    chosen, running = [], 0.0
    for t in kept:
        if running < p * mass:
            chosen.append(t)
        running += float(probs[t])
    top = float(probs[chosen[0]])
    chosen = [t for t in chosen if float(probs[t]) >= min_p * top] or chosen[:1]
    out = torch.zeros_like(probs)
    out[chosen] = probs[chosen] / probs[chosen].sum()
    return out


def test_sampling_top_k_one_is_argmax() -> None:
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(4 * 5, 50, generator=gen)
    ones = torch.ones(4)
    got = wu.sample_ddtree_posterior(
        logits, 5, ones, torch.ones(4, dtype=torch.long), ones, torch.zeros(4), generator=gen
    )
    assert torch.equal(got, logits.argmax(-1).view(4, 5))


def test_sampling_matches_filtered_distribution_per_request() -> None:
    gen = torch.Generator().manual_seed(7)
    params = [(1.0, 0, 1.0, 0.0), (0.7, 3, 1.0, 0.0), (1.3, 0, 0.6, 0.0), (1.0, 5, 0.9, 0.2)]
    base = torch.randn(len(params), 8, generator=gen) * 1.5
    draws, width = 6000, 2
    logits = base.repeat_interleave(width, 0).repeat(draws, 1)
    temps, ks, ps, mins = (torch.tensor([p[i] for p in params] * draws) for i in range(4))
    got = wu.sample_ddtree_posterior(logits, width, temps, ks.long(), ps, mins, generator=gen)
    got = got.view(draws, len(params), width)
    for r, (temp, k, p, min_p) in enumerate(params):
        ref = reference_filtered_probs(base[r], temp, k, p, min_p)
        freq = torch.bincount(got[:, r].reshape(-1), minlength=8).double() / (draws * width)
        assert (freq[ref == 0] == 0).all(), "sampled a token the filters remove"
        assert torch.allclose(freq, ref, atol=0.02), (r, freq, ref)


def test_sampled_walk_is_lossless() -> None:
    """Committed tokens follow the target: p(t1) then p(t2 | t1) for tokens in the tree."""
    vocab = 3
    target = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4]])
    # Tree: root -> 0 (node 1) -> 1 (node 3), root -> 1 (node 2); the draft prefers 0.
    tree = tree_utils.build_ddtree_tree_from_logits(
        torch.tensor([[2.0, 1.0, -5.0], [-5.0, 2.0, -5.0]]), 3
    )
    tokens = tree.node_token_ids.tolist()
    node_rows = [0] + [1 + tokens[i] for i in range(tree.num_nodes)]  # target row per node
    row_of_first = {0: 1, 1: 2, 2: 3}  # p(. | t1) row
    compiled = tree_utils.compile_ddtree_tree(tree, 2, 10)
    draws = 40000
    packed = wu.pack_ddtree_verify_batch([compiled] * draws, len(tree.parents))
    logits = target[node_rows].log().repeat(draws, 1)
    width = packed.width
    one = torch.ones(draws)
    posterior = wu.sample_ddtree_posterior(
        logits,
        width,
        one,
        torch.zeros(draws, dtype=torch.long),
        one,
        torch.zeros(draws),
        generator=torch.Generator().manual_seed(8),
    )
    idx, length, bonus = tree_utils.follow_verified_trees_batched(
        packed.next_token, packed.next_sibling, packed.walk_tokens, posterior, packed.max_depth
    )
    out = wu.collect_accepted_tokens(packed.walk_tokens, idx, length, bonus)
    first = torch.bincount(torch.tensor([o[0] for o in out]), minlength=vocab) / draws
    assert torch.allclose(first, target[0], atol=0.015)
    for t1 in (0, 1):  # first tokens that are tree nodes: the second token is committed too
        seconds = torch.tensor([o[1] for o in out if o[0] == t1])
        freq = torch.bincount(seconds, minlength=vocab) / len(seconds)
        assert torch.allclose(freq, target[row_of_first[t1]], atol=0.02), (t1, freq)


def reference_walk(tree, posterior_row: list[int]) -> tuple[list[int], int]:
    """Return the accepted nodes and bonus of one tree (ddtree_utils' per-tree walk)."""
    return tree_utils.follow_verified_tree(tree, posterior_row[: len(tree.parents)])


@pytest.mark.parametrize("seed", [10, 11])
def test_walk_commit_rows_and_kv_slots_match_reference(seed: int) -> None:
    trees, compiled, _, _ = random_trees(seed, MIXED_BUDGETS, vocab=4)
    width = 13
    packed = wu.pack_ddtree_verify_batch(compiled, width)
    gen = torch.Generator().manual_seed(seed)
    posterior = torch.randint(0, 4, (len(trees), width), generator=gen)
    idx, length, bonus = tree_utils.follow_verified_trees_batched(
        packed.next_token, packed.next_sibling, packed.walk_tokens, posterior, packed.max_depth
    )
    out = wu.collect_accepted_tokens(packed.walk_tokens, idx, length, bonus)
    # A request may finish early: commit fewer slots than accepted + 1.
    commit = torch.tensor([max(1, len(o) - (b % 2)) for b, o in enumerate(out)])
    rows = wu.select_accepted_rows(idx, commit, width)
    out_cache_loc = torch.randperm(len(trees) * width, generator=gen) + 100
    keep, free = wu.split_ddtree_kv_slots(out_cache_loc, rows)
    hidden = torch.randn(len(trees) * width, 3, generator=gen)
    ref_rows = []
    for b, tree in enumerate(trees):
        nodes, ref_bonus = reference_walk(tree, posterior[b].tolist())
        tokens = packed.walk_tokens[b].tolist()
        assert out[b] == [tokens[n] for n in nodes[1:]] + [ref_bonus]
        ref_rows += [b * width + n for n in nodes[: int(commit[b])]]
    assert rows.tolist() == ref_rows
    assert keep.tolist() == [int(out_cache_loc[r]) for r in ref_rows]
    assert sorted(free.tolist()) == sorted(set(out_cache_loc.tolist()) - set(keep.tolist()))
    assert torch.equal(hidden.index_select(0, rows), hidden[ref_rows])


def toy_target_logits(sequence: list[int], vocab: int) -> torch.Tensor:
    """Return deterministic next-token logits for a token sequence (the toy target)."""
    seed = hash(tuple(sequence)) % (2**31)
    return torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * 3


@pytest.mark.parametrize("builder", list(BUILDERS))
@pytest.mark.parametrize("seed", [20, 21, 22])
def test_simulated_verify_step_is_greedy_decoding(seed: int, builder: str) -> None:
    vocab, block, budgets = 6, 5, [0, 2, 9, 4, 9, 1]
    width = max(budgets) + 1
    gen = torch.Generator().manual_seed(seed)
    prefixes = [
        torch.randint(1, vocab, (int(n),), generator=gen).tolist() for n in (3, 8, 1, 5, 2, 6)
    ]
    roots = [int(torch.randint(1, vocab, (1,), generator=gen)) for _ in budgets]
    compiled = []
    for prefix, root, budget in zip(prefixes, roots, budgets, strict=True):
        chain, draft = prefix + [root], []
        for _ in range(block - 1):  # draft = target's greedy chain logits + noise
            row = toy_target_logits(chain, vocab)
            draft.append(row + torch.randn(vocab, generator=gen))
            chain.append(int(row.argmax()))
        tree = BUILDERS[builder].build_ddtree_tree_from_logits(torch.stack(draft), budget)
        compiled.append(tree_utils.compile_ddtree_tree(tree, root, len(prefix)))
    packed = wu.pack_ddtree_verify_batch(compiled, width)
    ids, pos = packed.input_ids.view(-1, width), packed.positions.view(-1, width)
    mask = wu.build_ddtree_custom_mask(packed.tree_mask, [len(p) for p in prefixes])
    # The toy target forward: each query sees the prefix and the slots its mask allows.
    logits, offset = [], 0
    for b, prefix in enumerate(prefixes):
        kv_len = len(prefix) + width
        rows = mask[offset : offset + width * kv_len].view(width, kv_len)
        offset += width * kv_len
        for q in range(width):
            assert rows[q, : len(prefix)].all()
            seen = sorted(
                (int(pos[b, k]), int(ids[b, k])) for k in range(width) if rows[q, len(prefix) + k]
            )
            assert [p for p, _ in seen] == list(range(len(prefix), int(pos[b, q]) + 1))
            logits.append(toy_target_logits(prefix + [t for _, t in seen], vocab))
    posterior = torch.stack(logits).argmax(-1).view(-1, width)
    idx, length, bonus = tree_utils.follow_verified_trees_batched(
        packed.next_token, packed.next_sibling, packed.walk_tokens, posterior, packed.max_depth
    )
    out = wu.collect_accepted_tokens(packed.walk_tokens, idx, length, bonus)
    commit = torch.tensor([len(o) for o in out])
    rows = wu.select_accepted_rows(idx, commit, width)
    out_cache_loc = torch.arange(len(prefixes) * width) + 1000
    keep, _ = wu.split_ddtree_kv_slots(out_cache_loc, rows)
    slot_content = {
        int(out_cache_loc[r]): (int(packed.input_ids[r]), int(packed.positions[r]))
        for r in range(len(out_cache_loc))
    }
    start = 0
    for b, prefix in enumerate(prefixes):
        chain = prefix + [roots[b]]
        for _ in out[b]:  # greedy decoding of the toy target, one token at a time
            chain.append(int(toy_target_logits(chain, vocab).argmax()))
        assert out[b] == chain[len(prefix) + 1 :]
        committed = chain[len(prefix) : len(prefix) + int(commit[b])]
        kept = keep[start : start + int(commit[b])].tolist()
        start += int(commit[b])
        assert [slot_content[s] for s in kept] == [
            (t, len(prefix) + j) for j, t in enumerate(committed)
        ]
    assert sum(len(o) - 1 for o in out) > 0, "the draft never matched: the test proves nothing"


def test_restrictions_name_each_unsupported_setting() -> None:
    ok = dict(
        page_size=1,
        tp_size=1,
        attention_backend="TritonAttnBackend",
        cuda_graph=True,
        hybrid_mamba=False,
        lm_head_sharded_or_extended=False,
    )
    assert wu.find_ddtree_restriction_errors(**ok) == []
    assert (
        wu.find_ddtree_restriction_errors(
            **{**ok, "attention_backend": "FlashInferAttnBackend", "cuda_graph": False}
        )
        == []
    )
    cases = {
        "page_size": (16, "--page-size"),
        "tp_size": (2, "--tp-size"),
        "attention_backend": ("FlashAttentionBackend", "custom tree mask"),
        "hybrid_mamba": (True, "last accepted node"),
        "lm_head_sharded_or_extended": (True, "LM head"),
    }
    for key, (value, words) in cases.items():
        errors = wu.find_ddtree_restriction_errors(**{**ok, key: value})
        assert len(errors) == 1 and words in errors[0], (key, errors)
    graphs = wu.find_ddtree_restriction_errors(
        **{**ok, "attention_backend": "FlashInferAttnBackend"}
    )
    assert len(graphs) == 1 and "--disable-cuda-graph" in graphs[0]


def test_gpu_suite_worker_check_runs_on_cpu() -> None:
    """smoke/gpu.py's worker check, driven with the CPU as the 'device' (CUDA on a GPU host)."""
    gpu_suite = load_smoke_script("_smoke_gpu_suite", "gpu.py")
    passed, detail = gpu_suite.check_worker_logic_matches(wu, tree_utils, torch.device("cpu"))
    assert passed, detail
    assert "width 65 equal" in detail and "tree builds" in detail
