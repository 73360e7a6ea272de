"""The patchset's tree builders against the reference's algorithm, and 1.1.9's fast builder
against 1.0.0's.

bench/ddtree_reference.py re-states liranringel/ddtree's `build_ddtree_tree` (topk,
full-vocabulary logsumexp, heap over rank tuples, numpy visibility); the speed benchmark
times it against ours, so these tests prove both build the same trees: 300 reference vectors
of tie-free logits (290 small, 10 of the benchmark's shape). Then the fast builder's own
parts: its logsumexp is torch.logsumexp's bit for bit, its CPU and device paths agree, ties
at the top-k's edge go to the lowest ids, and NaN/+inf are caught where no sample sees them.
"""

from __future__ import annotations

import functools
from types import ModuleType

import pytest
import torch

from tests.support import REPO, load_module, utils_file

DDTREE = REPO / "patchsets" / "ddtree"
REFERENCE = load_module("_bench_ddtree_reference", REPO / "bench" / "ddtree_reference.py")
OLD = load_module("_payload_ddtree_utils", utils_file(DDTREE / "1.0.0"))
FAST = load_module("_payload119_ddtree_utils", utils_file(DDTREE / "1.1.9"))
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


@pytest.mark.parametrize("ours", [OLD, FAST], ids=["1.0.0", "1.1.9"])
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


def fast_equals_old(logits: torch.Tensor, budget: int) -> bool:
    """True when 1.1.9 builds 1.0.0's tree exactly, prefix log-probs included."""
    old = OLD.build_ddtree_tree_from_logits(logits, budget)
    new = FAST.build_ddtree_tree_from_logits(logits, budget)
    return same_tree(new, old) and torch.equal(new.prefix_log_probs, old.prefix_log_probs)


@pytest.mark.parametrize("threads", [1, 2])
def test_fast_builder_equals_old_with_inf_rows_and_threads(threads: int) -> None:
    """-inf entries and dead rows included; any torch thread count (rows are split across
    that many threads)."""
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
            assert fast_equals_old(logits, budget), case
    finally:
        torch.set_num_threads(before)


def test_log_norm_is_torch_logsumexp_bit_for_bit() -> None:
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
            assert torch.equal(FAST._log_norm(logits, row_max), want)
        finally:
            torch.set_num_threads(before)


def test_device_path_matches_cpu_path() -> None:
    """The accelerator path (sort + one packed transfer) run on CPU tensors gives what the
    CPU path gives, ties included."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(4, 50_000, generator=gen).round()  # many ties, at the edge too
    logits[1, :20] = 9.0
    for k in (1, 5, 64, 300):
        top_cpu, ids_cpu, norm_cpu = FAST._top_log_probs_cpu(logits, k)
        top_dev, ids_dev, norm_dev = FAST._top_log_probs_device(logits, k)
        assert torch.equal(top_cpu, top_dev) and torch.equal(norm_cpu, norm_dev)
        assert (ids_cpu == ids_dev).all(), k


def test_ties_at_the_topk_edge_go_to_the_lowest_ids() -> None:
    logits = torch.zeros(2, 60_000)  # long enough for the sampled path
    logits[0, 50_000] = 1.0
    tree = FAST.build_ddtree_tree_from_logits(logits, 5)
    assert tree.node_token_ids.tolist() == [50_000, 0, 1, 2, 3]
    assert tree.parents == [-1, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("bad", ["nan", "inf", "nan_everywhere"])
def test_nan_and_inf_are_caught_off_the_sample(bad: str) -> None:
    logits = torch.randn(3, 151_936, generator=torch.Generator().manual_seed(5))
    if bad == "nan":
        logits[1, 4_999] = float("nan")
    elif bad == "inf":
        logits[2, 7] = float("inf")
    else:
        logits[0, 1::2] = float("nan")
    for budget in (0, 16):
        with pytest.raises(ValueError, match="NaN" if "nan" in bad else r"\+inf"):
            FAST.build_ddtree_tree_from_logits(logits, budget)
