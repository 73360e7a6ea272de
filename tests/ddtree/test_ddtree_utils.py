"""Unit tests for the DDTree payload (ddtree_utils.py) and its smoke gate (smoke/ddtree.py)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import subprocess
import sys
from types import ModuleType

import pytest
import torch

from tests.support import REPO, SMOKE_DIR, load_module, load_smoke_script, utils_file

# Each shipped ddtree_utils.py: 1.0.0's (shared by 1.1.0 and 2.0.0), 1.1.9's faster builder
# (shared by 1.1.10, 2.0.1 and 2.1.0), 1.1.11's one-read builder (shared by 2.1.1) and 1.1.12's,
# whose heap reads only the entries it pops (shared by 2.1.2). Every test of the payload runs
# on each.
BUILDERS = {
    "1.0.0": "_payload_ddtree_utils",
    "1.1.9": "_payload119_ddtree_utils",
    "1.1.11": "_payload1111_ddtree_utils",
    "1.1.12": "_payload1112_ddtree_utils",
}
SEED_LOGITS = [[5.0, 4.0, 1.0], [4.0, 2.0, 1.0]]


@pytest.fixture(scope="module", params=list(BUILDERS))
def ddtree_utils(request: pytest.FixtureRequest) -> ModuleType:
    """A shipped ddtree_utils.py, loaded from where the patchset keeps it (no sglang)."""
    version = request.param
    return load_module(BUILDERS[version], utils_file(REPO / "patchsets/ddtree" / version))


@pytest.fixture(scope="module")
def smoke_ddtree() -> ModuleType:
    """ddtree_deploy/smoke/ddtree.py as a module, for its check functions."""
    return load_smoke_script("_smoke_ddtree", "ddtree.py")


# ---------------------------------------------------------------- references


def prefix_probs(logits: torch.Tensor) -> dict[tuple[int, ...], float]:
    """Return every prefix with non-zero draft probability -> its probability."""
    probs = []
    for row in logits.double():
        finite = bool(torch.isfinite(row).any())
        probs.append(torch.softmax(row, -1).tolist() if finite else [0.0] * row.numel())
    out: dict[tuple[int, ...], float] = {}
    for depth in range(1, len(probs) + 1):
        for prefix in itertools.product(range(len(probs[0])), repeat=depth):
            p = math.prod(probs[i][t] for i, t in enumerate(prefix))
            if p > 0:
                out[prefix] = p
    return out


def brute_force_optimum(logits: torch.Tensor, budget: int) -> tuple[int, float]:
    """Return (size, best sum) over all prefix-closed trees of min(budget, #prefixes) nodes."""
    probs = prefix_probs(logits)
    size = min(budget, len(probs))
    best = 0.0
    for subset in itertools.combinations(probs, size):
        chosen = set(subset)
        if all(len(p) == 1 or p[:-1] in chosen for p in subset):
            best = max(best, sum(probs[p] for p in subset))
    return size, best


def tree_prefixes(tree) -> list[tuple[int, ...]]:
    """Return each node's token prefix (root = ()), recomputed from parents."""
    prefixes: list[tuple[int, ...]] = [()]
    for node in range(1, len(tree.parents)):
        prefixes.append(prefixes[tree.parents[node]] + (int(tree.node_token_ids[node - 1]),))
    return prefixes


def reference_layout(parents: list[int]) -> tuple[list[int], list[int]]:
    """Return first-child / next-sibling links, children in index order."""
    size = len(parents)
    children = [[c for c in range(1, size) if parents[c] == node] for node in range(size)]
    next_token = [kids[0] if kids else -1 for kids in children]
    next_sibling = [-1] * size
    for kids in children:
        for a, b in itertools.pairwise(kids):
            next_sibling[a] = b
    return next_token, next_sibling


def reference_eagle_greedy(candidates, next_token, next_sibling, target) -> tuple[list[int], int]:
    """Walk sglang's EAGLE layout as its greedy tree verification does (one request)."""
    accepted, last, current = [0], 0, 0
    while True:
        current = next_token[current]
        while current != -1 and candidates[current] != target[last]:
            current = next_sibling[current]
        if current == -1:
            return accepted, target[last]
        accepted.append(current)
        last = current


def random_logits(gen: torch.Generator, depths: int, vocab: int, scale: float = 3.0):
    """Return random logits; some cases are integer-valued (ties) or carry -inf."""
    logits = torch.randn(depths, vocab, generator=gen) * scale
    mode = int(torch.randint(0, 4, (1,), generator=gen))
    if mode == 1:
        logits = logits.round()
    elif mode == 2:
        logits[torch.rand(depths, vocab, generator=gen) < 0.3] = float("-inf")
    return logits


def drafted_posterior(tree, gen: torch.Generator, vocab: int, follow: float = 0.7):
    """Return a posterior that follows the draft with probability `follow` per node."""
    post = torch.randint(0, vocab, (len(tree.parents),), generator=gen)
    for node, kids in enumerate(tree.child_maps):
        if kids and float(torch.rand(1, generator=gen)) < follow:
            tokens = sorted(kids)
            post[node] = tokens[int(torch.randint(0, len(tokens), (1,), generator=gen))]
    return post


# ---------------------------------------------------------------- builder


def test_seed_example(ddtree_utils: ModuleType) -> None:
    tree = ddtree_utils.build_ddtree_tree_from_logits(torch.tensor(SEED_LOGITS), 4)
    assert len(tree.parents) == 5
    assert tree.parents == [-1, 0, 1, 0, 3]
    posterior = [int(tree.node_token_ids[0]), 777, 888, 999, 111]
    assert ddtree_utils.follow_verified_tree(tree, posterior) == ([0, 1], 777)


def test_optimal_against_brute_force(ddtree_utils: ModuleType) -> None:
    gen = torch.Generator().manual_seed(1234)
    shapes = [(1, 2), (1, 5), (2, 2), (2, 3), (3, 2), (2, 4), (3, 3)]
    cases = 0
    for case in range(210):
        depths, vocab = shapes[case % len(shapes)]
        num_prefixes = sum(vocab**d for d in range(1, depths + 1))
        # The largest budget whose brute force stays under ~20k subsets.
        max_budget = max(b for b in range(1, 9) if math.comb(num_prefixes, b) <= 20_000)
        budget = int(torch.randint(0, max_budget + 1, (1,), generator=gen))
        logits = random_logits(gen, depths, vocab)
        tree = ddtree_utils.build_ddtree_tree_from_logits(logits, budget)
        size, best = brute_force_optimum(logits, budget)
        probs = prefix_probs(logits)
        got = sum(probs[p] for p in tree_prefixes(tree)[1:])
        assert len(tree.parents) - 1 == size, f"case {case}: {logits} budget {budget}"
        assert got == pytest.approx(best, abs=1e-6), f"case {case}: {logits} budget {budget}"
        cases += 1
    assert cases >= 200


def test_topology_invariants(ddtree_utils: ModuleType, smoke_ddtree: ModuleType) -> None:
    gen = torch.Generator().manual_seed(7)
    for case in range(60):
        depths = 1 + case % 6
        vocab = 2 + case % 9
        budget = int(torch.randint(0, 40, (1,), generator=gen))
        logits = random_logits(gen, depths, vocab)
        tree = ddtree_utils.build_ddtree_tree_from_logits(logits, budget)
        n = len(tree.parents) - 1
        assert tree.node_token_ids.shape == (n,) and tree.depths.shape == (n,)
        assert tree.parents[0] == -1 and all(0 <= p < i for i, p in enumerate(tree.parents) if i)
        depth_of = [0, *tree.depths.tolist()]
        assert all(depth_of[i] == depth_of[tree.parents[i]] + 1 for i in range(1, n + 1))
        prefixes = tree_prefixes(tree)
        assert len(set(prefixes)) == n + 1, "sibling tokens must be distinct"
        for i in range(n + 1):
            for j in range(n + 1):
                visible = prefixes[i][: len(prefixes[j])] == prefixes[j]
                assert bool(tree.visibility[i, j]) == visible
        assert smoke_ddtree.find_topology_problems(tree, logits, budget) == []


def test_prefix_log_probs_match_logits(ddtree_utils: ModuleType) -> None:
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(3))
    tree = ddtree_utils.build_ddtree_tree_from_logits(logits, 30)
    log_probs = torch.log_softmax(logits.double(), -1)
    expected = [
        sum(float(log_probs[d, t]) for d, t in enumerate(prefix))
        for prefix in tree_prefixes(tree)[1:]
    ]
    assert tree.prefix_log_probs.tolist() == pytest.approx(expected, abs=1e-5)
    assert tree.prefix_log_probs.tolist() == sorted(tree.prefix_log_probs.tolist(), reverse=True)


def test_edge_cases(ddtree_utils: ModuleType) -> None:
    build = ddtree_utils.build_ddtree_tree_from_logits
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.5, 0.1, 0.2]])
    root_only = build(logits, 0)
    assert root_only.parents == [-1] and root_only.child_maps == [{}]
    assert root_only.visibility.tolist() == [[True]] and root_only.node_token_ids.numel() == 0
    assert build(logits, 1).node_token_ids.tolist() == [1]
    single_depth = build(logits[:1], 100)
    assert single_depth.parents == [-1, 0, 0, 0]
    assert single_depth.node_token_ids.tolist() == [1, 2, 0]
    assert len(build(logits, 100).parents) == 1 + 3 + 9
    assert build(logits.bfloat16(), 4).parents == build(logits, 4).parents
    inf = float("-inf")
    masked = build(torch.tensor([[inf, 1.0, inf], [2.0, inf, 1.0]]), 10)
    assert tree_prefixes(masked)[1:] == [(1,), (1, 0), (1, 2)]
    dead_middle = build(torch.tensor([[0.0, 1.0], [inf, inf], [1.0, 0.0]]), 10)
    assert dead_middle.depths.tolist() == [1, 1]
    assert build(torch.full((2, 3), inf), 5).parents == [-1]
    assert build(torch.empty(0, 4), 5).parents == [-1]


@pytest.mark.parametrize(
    "logits, budget",
    [
        (torch.tensor([[1.0, float("nan")]]), 2),
        (torch.tensor([[1.0, 2.0], [float("nan"), 0.0]]), 0),
        (torch.tensor([[1.0, float("inf")]]), 2),
        (torch.tensor([1.0, 2.0]), 2),
        (torch.tensor([[1.0, 2.0]]), -1),
    ],
)
def test_bad_input_raises(ddtree_utils: ModuleType, logits: torch.Tensor, budget: int) -> None:
    with pytest.raises(ValueError):
        ddtree_utils.build_ddtree_tree_from_logits(logits, budget)


def test_ties_are_deterministic(ddtree_utils: ModuleType) -> None:
    logits = torch.zeros(3, 6)
    first = ddtree_utils.build_ddtree_tree_from_logits(logits, 20)
    again = ddtree_utils.build_ddtree_tree_from_logits(logits.clone(), 20)
    assert first.parents == again.parents
    assert torch.equal(first.node_token_ids, again.node_token_ids)
    assert first.node_token_ids[:6].tolist() == list(range(6))


# ---------------------------------------------------------------- walks and layout


def test_single_walk_rejects_wrong_length(ddtree_utils: ModuleType) -> None:
    tree = ddtree_utils.build_ddtree_tree_from_logits(torch.tensor(SEED_LOGITS), 4)
    with pytest.raises(ValueError):
        ddtree_utils.follow_verified_tree(tree, [0, 1])


def test_compile_against_reference(ddtree_utils: ModuleType) -> None:
    gen = torch.Generator().manual_seed(11)
    for case in range(40):
        logits = random_logits(gen, 1 + case % 5, 3 + case % 6)
        tree = ddtree_utils.build_ddtree_tree_from_logits(logits, case % 25)
        compiled = ddtree_utils.compile_ddtree_tree(tree, 99, 1000 + case)
        prefixes = tree_prefixes(tree)
        n1 = len(prefixes)
        assert compiled.input_ids.tolist() == [99, *tree.node_token_ids.tolist()]
        assert compiled.positions.tolist() == [1000 + case + len(p) for p in prefixes]
        mask = [[pi[: len(pj)] == pj for pj in prefixes] for pi in prefixes]
        assert compiled.attention_mask.tolist() == mask
        next_token, next_sibling = reference_layout(tree.parents)
        assert compiled.retrieve_next_token.tolist() == next_token
        assert compiled.retrieve_next_sibling.tolist() == next_sibling
        assert compiled.retrieve_index.tolist() == list(range(n1))
        post = drafted_posterior(tree, gen, logits.shape[1]).tolist()
        eagle = reference_eagle_greedy(compiled.input_ids.tolist(), next_token, next_sibling, post)
        assert eagle == ddtree_utils.follow_verified_tree(tree, post)


def test_batched_walk_matches_single(ddtree_utils: ModuleType) -> None:
    gen = torch.Generator().manual_seed(5)
    for _ in range(10):
        trees, compiled, posts = [], [], []
        depths, vocab = 6, 8
        for b in range(int(torch.randint(1, 9, (1,), generator=gen))):
            logits = random_logits(gen, depths, vocab)
            tree = ddtree_utils.build_ddtree_tree_from_logits(logits, b * 9 % 40)
            trees.append(tree)
            compiled.append(ddtree_utils.compile_ddtree_tree(tree, 3, 0))
            posts.append(drafted_posterior(tree, gen, vocab, follow=0.9))
        next_token, next_sibling, node_tokens = ddtree_utils.stack_compiled_ddtrees(compiled)
        posterior = torch.full_like(node_tokens, 12345)
        for b, post in enumerate(posts):
            posterior[b, : post.numel()] = post
        for max_depth in (None, depths):
            index, length, bonus = ddtree_utils.follow_verified_trees_batched(
                next_token, next_sibling, node_tokens, posterior, max_depth=max_depth
            )
            width = node_tokens.shape[1] if max_depth is None else depths + 1
            assert index.shape == (len(trees), width)
            for b, tree in enumerate(trees):
                accepted, want_bonus = ddtree_utils.follow_verified_tree(tree, posts[b])
                row = index[b].tolist()
                assert row == accepted + [-1] * (width - len(accepted))
                assert int(length[b]) == len(accepted) - 1
                assert int(bonus[b]) == want_bonus


def test_batched_walk_padding_is_not_token_zero(ddtree_utils: ModuleType) -> None:
    small = ddtree_utils.build_ddtree_tree_from_logits(torch.tensor([[0.0, 5.0]]), 1)
    big = ddtree_utils.build_ddtree_tree_from_logits(torch.tensor([[5.0, 0.0, 1.0]]), 3)
    compiled = [ddtree_utils.compile_ddtree_tree(t, 0, 0) for t in (small, big)]
    next_token, next_sibling, node_tokens = ddtree_utils.stack_compiled_ddtrees(compiled)
    assert node_tokens[0].tolist() == [0, 1, -1, -1]
    assert next_token[0, 2:].tolist() == [-1, -1] and next_sibling[0, 2:].tolist() == [-1, -1]
    # Root of the small tree asks for token 0: padding must never match it.
    posterior = torch.tensor([[0, 0, 0, 0], [2, 9, 9, 9]])
    index, length, bonus = ddtree_utils.follow_verified_trees_batched(
        next_token, next_sibling, node_tokens, posterior, max_depth=1
    )
    assert index.tolist() == [[0, -1], [0, 2]]
    assert length.tolist() == [0, 1] and bonus.tolist() == [0, 9]


# ---------------------------------------------------------------- the smoke gate can fail


def corrupt(tree, **changes):
    """Return a copy of a frozen tree with fields replaced."""
    return dataclasses.replace(tree, **changes)


def test_smoke_checks_reject_wrong_parent(ddtree_utils, smoke_ddtree) -> None:
    logits = torch.tensor(SEED_LOGITS)
    tree = ddtree_utils.build_ddtree_tree_from_logits(logits, 4)
    assert smoke_ddtree.find_topology_problems(tree, logits, 4) == []
    wrong = corrupt(tree, parents=[-1, 0, 1, 0, 1])
    assert smoke_ddtree.find_topology_problems(wrong, logits, 4)
    wrong_depth = corrupt(tree, parents=[-1, 0, 0, 0, 3])
    assert smoke_ddtree.find_topology_problems(wrong_depth, logits, 4)
    later_parent = corrupt(tree, parents=[-1, 0, 3, 0, 3])
    assert smoke_ddtree.find_topology_problems(later_parent, logits, 4)


def test_smoke_checks_reject_bad_mask_and_suboptimal(ddtree_utils, smoke_ddtree) -> None:
    logits = torch.tensor(SEED_LOGITS)
    tree = ddtree_utils.build_ddtree_tree_from_logits(logits, 4)
    mask = tree.visibility.clone()
    mask[4, 1] = True
    assert smoke_ddtree.find_topology_problems(corrupt(tree, visibility=mask), logits, 4)
    tokens = tree.node_token_ids.clone()
    tokens[3] = 2  # node 4 takes its parent's least likely child
    maps = [dict(m) for m in tree.child_maps]
    maps[3] = {2: 4}
    worse = corrupt(tree, node_token_ids=tokens, child_maps=maps)
    problems = smoke_ddtree.find_topology_problems(worse, logits, 4)
    assert problems and "not optimal" in problems[0]
    short = corrupt(
        tree,
        node_token_ids=tree.node_token_ids[:3],
        depths=tree.depths[:3],
        parents=tree.parents[:4],
        child_maps=[dict(m) for m in tree.child_maps[:4]],
        visibility=tree.visibility[:4, :4],
    )
    short.child_maps[3].clear()
    assert smoke_ddtree.find_topology_problems(short, logits, 4)


def test_smoke_suite_fails_with_a_broken_builder(ddtree_utils, smoke_ddtree) -> None:
    broken = ModuleType("broken_ddtree_utils")
    broken.__dict__.update(ddtree_utils.__dict__)

    def build_wrong_parent(logits, budget):
        tree = ddtree_utils.build_ddtree_tree_from_logits(logits, budget)
        if len(tree.parents) < 3:
            return tree
        return corrupt(tree, parents=[*tree.parents[:-1], 0])

    broken.build_ddtree_tree_from_logits = build_wrong_parent
    suite = smoke_ddtree.Suite("ddtree", request={})
    results = {
        c["name"]: c for c in smoke_ddtree.run_checks(suite, broken, with_registration=False)
    }
    assert not results["seed"]["passed"]
    assert not results["random_topology"]["passed"]
    assert not results["large_vocab"]["passed"]


def test_smoke_suite_passes_on_payload(ddtree_utils, smoke_ddtree) -> None:
    suite = smoke_ddtree.Suite("ddtree", request={})
    results = smoke_ddtree.run_checks(suite, ddtree_utils, with_registration=False)
    assert all(c["passed"] for c in results), results
    assert "ms" in next(c for c in results if c["name"] == "large_vocab")["detail"]


def run_script(name: str, stdin: str) -> tuple[int, list[str]]:
    """Run a smoke script with the default python3; return (exit code, stdout lines)."""
    proc = subprocess.run(
        [sys.executable, str(SMOKE_DIR / name)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    return proc.returncode, proc.stdout.splitlines()


def test_smoke_script_reports_missing_sglang_as_json() -> None:
    try:
        import sglang  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("sglang importable here; the failure path is not reachable")
    code, lines = run_script("ddtree.py", "")
    assert code == 1 and len(lines) == 1
    result = json.loads(lines[0])
    assert result["suite"] == "ddtree" and result["passed"] is False
    assert result["skipped"] is False and "sglang" in result["details"]


def test_gpu_script_skips_without_gpu() -> None:
    code, lines = run_script("gpu.py", json.dumps({"options": {"gpus": 0}}))
    assert code == 0 and len(lines) == 1
    result = json.loads(lines[0])
    assert result == {**result, "suite": "gpu", "passed": False, "skipped": True}
    assert result["details"] == "skipped: no GPU"


def test_gpu_script_skips_when_the_host_declares_nothing_and_has_no_cuda() -> None:
    code, lines = run_script("gpu.py", json.dumps({"options": {}}))
    result = json.loads(lines[0])
    assert code == 0 and result["skipped"] and result["details"] == "skipped: no GPU"


def test_gpu_script_fails_a_declared_gpu_host_without_usable_cuda() -> None:
    """gpus = 2 in the inventory but this machine's torch has no CUDA: the suite fails and
    says why (it used to skip, a gate that could not fail on a broken GPU host)."""
    code, lines = run_script("gpu.py", json.dumps({"options": {"gpus": 2}}))
    result = json.loads(lines[0])
    assert code == 1 and result["passed"] is False and result["skipped"] is False
    assert [c["name"] for c in result["checks"]] == ["cuda_usable"]
    assert "host declares gpus = 2 but" in result["details"], result["details"]
