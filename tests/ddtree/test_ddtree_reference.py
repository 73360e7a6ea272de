"""The patchset's tree builders against the reference's algorithm, and the fast builders
(1.1.9's, 1.1.11's one-read builder and 1.1.12's, whose heap reads only what it pops) against
1.0.0's.

bench/ddtree_reference.py re-states liranringel/ddtree's `build_ddtree_tree` (topk,
full-vocabulary logsumexp, heap over rank tuples, numpy visibility); the speed benchmark
times it against ours, so these tests prove both build the same trees: 300 reference vectors
of tie-free logits (290 small, 10 of the benchmark's shape). Then the fast builder's own
parts: the logsumexp is torch.logsumexp's bit for bit (1.1.11's a chunk of rows at a time
too), the CPU and device paths agree, the one-read block gather finds what one compare pass
finds, ties at the top-k's edge go to the lowest ids, and NaN/+inf are caught where no sample
or block maximum sees them.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np
import pytest
import torch

from tests.support import REPO, load_module, utils_file

DDTREE = REPO / "patchsets" / "ddtree"
REFERENCE = load_module("_bench_ddtree_reference", REPO / "bench" / "ddtree_reference.py")
OLD = load_module("_payload_ddtree_utils", utils_file(DDTREE / "1.0.0"))
FAST = load_module("_payload119_ddtree_utils", utils_file(DDTREE / "1.1.9"))
ONE_READ = load_module("_payload1111_ddtree_utils", utils_file(DDTREE / "1.1.11"))
POPPED = load_module("_payload1112_ddtree_utils", utils_file(DDTREE / "1.1.12"))
FAST_BUILDERS = pytest.mark.parametrize(
    "fast", [FAST, ONE_READ, POPPED], ids=["1.1.9", "1.1.11", "1.1.12"]
)
# The one-read builders: 1.1.11's, and 1.1.12's (flat-index candidates, arrays for the heap).
ONE_READ_BUILDERS = pytest.mark.parametrize(
    "one_read", [ONE_READ, POPPED], ids=["1.1.11", "1.1.12"]
)
SMALL_SHAPES = [(1, 3), (2, 7), (3, 50), (5, 500), (8, 5000), (15, 64)]


def tie_free_logits(gen: torch.Generator, depths: int, vocab: int, budget: int) -> torch.Tensor:
    """Return random logits without ties: no two equal values among a row's budget + 1
    largest, and no two of the budget + 1 best prefixes with equal sums. Each builder orders
    ties by its own rule (the reference by rank tuples, ours by token id and (depth, rank,
    parent)), so only tie-free logits must give the same tree."""
    while True:
        logits = torch.randn(depths, vocab, generator=gen) * 3.0
        top = torch.topk(logits, min(budget + 1, vocab), dim=-1).values
        if any(torch.unique(row).numel() < row.numel() for row in top):
            continue
        sums = OLD.build_ddtree_tree_from_logits(logits, budget + 1).prefix_log_probs
        if torch.unique(sums).numel() == sums.numel():
            return logits


def same_tree(ours, reference) -> bool:
    """True when two trees have the same nodes in the same order, links and mask."""
    return (
        ours.parents == reference.parents
        and ours.child_maps == reference.child_maps
        and torch.equal(ours.node_token_ids, reference.node_token_ids)
        and torch.equal(ours.depths, reference.depths)
        and torch.equal(ours.visibility, reference.visibility)
    )


@functools.cache
def reference_vectors() -> list[tuple[torch.Tensor, int]]:
    """Return the 300 (logits, budget) cases: 290 small shapes (budgets up to 200), 10 at
    V=151936 (budgets up to 600; L=15 from budget 16 on)."""
    gen = torch.Generator().manual_seed(19)
    cases = []
    for case in range(290):
        depths, vocab = SMALL_SHAPES[case % len(SMALL_SHAPES)]
        budget = min(200, int(torch.randint(1, 3 * vocab + 2, (1,), generator=gen)))
        cases.append((tie_free_logits(gen, depths, vocab, budget), budget))
    for budget in (1, 7, 16, 64, 100, 256, 300, 400, 512, 600):  # 1024: ties nearly always
        cases.append((tie_free_logits(gen, 15 if budget >= 16 else 3, 151_936, budget), budget))
    return cases


@pytest.mark.parametrize(
    "ours", [OLD, FAST, ONE_READ, POPPED], ids=["1.0.0", "1.1.9", "1.1.11", "1.1.12"]
)
def test_reference_vectors_give_the_reference_trees(ours: ModuleType) -> None:
    cases = reference_vectors()
    assert len(cases) == 300
    for number, (logits, budget) in enumerate(cases):
        want = REFERENCE.build_reference_tree(logits, budget)
        assert same_tree(ours.build_ddtree_tree_from_logits(logits, budget), want), number


def test_reference_copy_can_fail() -> None:
    """Negative control: a tree off by one token is not the reference's."""
    logits = tie_free_logits(torch.Generator().manual_seed(1), 3, 50, 10)
    tree = FAST.build_ddtree_tree_from_logits(logits, 10)
    tokens = tree.node_token_ids.clone()
    tokens[-1] += 1
    wrong = type(tree)(**{**vars(tree), "node_token_ids": tokens})
    assert not same_tree(wrong, REFERENCE.build_reference_tree(logits, 10))


def fast_equals_old(fast: ModuleType, logits: torch.Tensor, budget: int) -> bool:
    """True when a fast builder builds 1.0.0's tree exactly, prefix log-probs included."""
    old = OLD.build_ddtree_tree_from_logits(logits, budget)
    new = fast.build_ddtree_tree_from_logits(logits, budget)
    return same_tree(new, old) and torch.equal(new.prefix_log_probs, old.prefix_log_probs)


@FAST_BUILDERS
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_builder_equals_old_with_inf_rows_and_threads(fast: ModuleType, threads: int) -> None:
    """-inf entries and dead rows included; any torch thread count (1.1.9 splits rows across
    that many threads, 1.1.11 chunks them on one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(threads)
        for case in range(60):
            depths, vocab = [(2, 3), (4, 40), (6, 700), (3, 40_000), (2, 151_936)][case % 5]
            logits = torch.randn(depths, vocab, generator=gen) * 3.0
            if case % 3 == 1:
                logits[torch.rand(depths, vocab, generator=gen) < 0.4] = float("-inf")
            elif case % 3 == 2:
                logits[case % depths] = float("-inf")
            budget = int(torch.randint(0, 300, (1,), generator=gen))
            assert fast_equals_old(fast, logits, budget), case
    finally:
        torch.set_num_threads(before)


@ONE_READ_BUILDERS
@pytest.mark.parametrize("threads", [1, 2])
def test_one_read_builder_breaks_ties_as_the_fast_builder(
    one_read: ModuleType, threads: int
) -> None:
    """On logits full of ties (rounded; -0.0 beside 0.0; at the top-k's edge too), 1.1.11
    and 1.1.12 build 1.1.9's tree exactly: equal log-probs in token id order. (1.0.0's topk picks
    among ties at the edge in its own order, so it is left out here.)"""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(10 + threads)
        for case in range(40):
            depths, vocab = [(2, 3), (4, 40), (6, 700), (3, 40_000), (2, 151_936)][case % 5]
            logits = (torch.randn(depths, vocab, generator=gen) * 2.0).round()
            logits[0, ::3] = logits[0, ::3].abs() * -0.0
            if case % 2:
                logits[torch.rand(depths, vocab, generator=gen) < 0.3] = float("-inf")
            budget = int(torch.randint(0, 300, (1,), generator=gen))
            want = FAST.build_ddtree_tree_from_logits(logits, budget)
            tree = one_read.build_ddtree_tree_from_logits(logits, budget)
            assert same_tree(tree, want), case
            assert torch.equal(tree.prefix_log_probs, want.prefix_log_probs), case
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
def test_popped_builder_builds_the_one_read_trees(threads: int) -> None:
    """1.1.12 changes only how the heap reads the top k (arrays and .item(), not lists) and how
    the candidates are indexed (flat): on the benchmark's shape (L=15, V=151936) at its four
    budgets and on a vocabulary with a tail (V mod block != 0), with dead rows, it builds
    1.1.11's tree, prefix log-probs included."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(20 + threads)
        for vocab in (151_936, 151_931):
            logits = torch.randn(15, vocab, generator=gen) * 4.0
            logits[12] = float("-inf")  # the trees stop at depth 12
            for budget in (0, 1, 16, 64, 256, 1024):
                want = ONE_READ.build_ddtree_tree_from_logits(logits, budget)
                tree = POPPED.build_ddtree_tree_from_logits(logits, budget)
                assert same_tree(tree, want), (vocab, budget)
                assert torch.equal(tree.prefix_log_probs, want.prefix_log_probs), (vocab, budget)
    finally:
        torch.set_num_threads(before)


@FAST_BUILDERS
def test_log_norm_is_torch_logsumexp_bit_for_bit(fast: ModuleType) -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 151_936, generator=gen) * 4.0
    logits[2] = float("-inf")
    logits[3, ::3] = float("-inf")
    row_max = logits.amax(-1, keepdim=True)
    for threads in (1, 2):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            want = torch.logsumexp(logits, -1, keepdim=True)
            assert torch.equal(fast._log_norm(logits, row_max), want)
        finally:
            torch.set_num_threads(before)


@ONE_READ_BUILDERS
@pytest.mark.parametrize("threads", [1, 2])
def test_chunked_logsumexp_is_torch_logsumexp_bit_for_bit(
    one_read: ModuleType, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-read logsumexp, a chunk of rows at a time on one thread (chunks of 2 and 3 rows
    here), whole on two; its block maxima give each row's maximum, tails and dead rows too."""
    monkeypatch.setattr(one_read, "_CHUNK_BYTES", 1)  # two rows a chunk, three at the end
    gen = torch.Generator().manual_seed(6)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for depths, vocab, k in [(1, 151_936, 16), (2, 5_000, 3), (5, 40_001, 64), (7, 3, 1)]:
            logits = torch.randn(depths, vocab, generator=gen) * 4.0
            logits[-1, ::2] = float("-inf")
            if depths > 2:
                logits[1] = float("-inf")
            block = one_read._block_size(vocab, k)
            maxima, log_norm = one_read._scan_chunks(logits, block)
            assert torch.equal(log_norm, torch.logsumexp(logits, -1, keepdim=True)), vocab
            if block:
                blocks = logits[:, : maxima.shape[1] * block].reshape(depths, -1, block)
                assert np.array_equal(maxima, blocks.amax(-1).numpy())
    finally:
        torch.set_num_threads(before)


@ONE_READ_BUILDERS
@pytest.mark.parametrize("share", [0, 10**9], ids=["blocks-read-alone", "one-compare"])
def test_block_candidates_are_the_entries_that_reach_the_bound(
    one_read: ModuleType, share: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.1.11 and 1.1.12 find the entries at or above each row's bound (its k-th largest
    block maximum) either way: reading the chosen blocks and the tail, or comparing every
    entry."""
    monkeypatch.setattr(one_read, "_GATHER_SHARE", share)
    gen = torch.Generator().manual_seed(7)
    for depths, vocab, k in [(3, 700, 1), (4, 40_001, 64), (2, 151_936, 300), (3, 9_999, 7)]:
        logits = (torch.randn(depths, vocab, generator=gen) * 2.0).round()  # ties
        block = one_read._block_size(vocab, k)
        assert block, (vocab, k)
        maxima = logits[:, : vocab // block * block].reshape(depths, -1, block).amax(-1)
        bound = maxima.kthvalue(maxima.shape[1] - k + 1, -1, keepdim=True).values
        want = np.flatnonzero((logits >= bound).numpy())
        found = one_read._candidates(logits.numpy(), maxima.numpy(), block, k)
        assert np.array_equal(found, want), (vocab, k)


def test_device_path_matches_cpu_path() -> None:
    """The accelerator path (sort + one packed transfer) run on CPU tensors gives what the
    CPU path gives, ties included (both builders)."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(4, 50_000, generator=gen).round()  # many ties, at the edge too
    logits[1, :20] = 9.0
    for k in (1, 5, 64, 300):
        top_cpu, ids_cpu, norm_cpu = FAST._top_log_probs_cpu(logits, k)
        top_dev, ids_dev, norm_dev = FAST._top_log_probs_device(logits, k)
        assert torch.equal(top_cpu, top_dev) and torch.equal(norm_cpu, norm_dev)
        assert (ids_cpu == ids_dev).all(), k
        for one_read in (ONE_READ, POPPED):
            top_cpu, ids_cpu, norm_cpu = one_read._top_log_probs_cpu(logits, k)
            top_dev, ids_dev, norm_dev = one_read._top_log_probs_device(logits, k)
            assert np.array_equal(top_cpu, top_dev) and torch.equal(norm_cpu, norm_dev)
            assert np.array_equal(ids_cpu, ids_dev), k


@FAST_BUILDERS
def test_ties_at_the_topk_edge_go_to_the_lowest_ids(fast: ModuleType) -> None:
    logits = torch.zeros(2, 60_000)  # long enough for the sampled / blocked path
    logits[0, 50_000] = 1.0
    logits[0, 3] = -0.0  # equal to 0.0
    tree = fast.build_ddtree_tree_from_logits(logits, 5)
    assert tree.node_token_ids.tolist() == [50_000, 0, 1, 2, 3]
    assert tree.parents == [-1, 0, 0, 0, 0, 0]


@FAST_BUILDERS
@pytest.mark.parametrize("bad", ["nan", "inf", "nan_everywhere"])
def test_nan_and_inf_are_caught_off_the_sample(fast: ModuleType, bad: str) -> None:
    logits = torch.randn(3, 151_936, generator=torch.Generator().manual_seed(5))
    if bad == "nan":
        logits[1, 4_999] = float("nan")
    elif bad == "inf":
        logits[2, 7] = float("inf")
    else:
        logits[0, 1::2] = float("nan")
    for budget in (0, 16):
        with pytest.raises(ValueError, match="NaN" if "nan" in bad else r"\+inf"):
            fast.build_ddtree_tree_from_logits(logits, budget)
