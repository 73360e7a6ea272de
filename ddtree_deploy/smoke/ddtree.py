"""Smoke suite `ddtree`: the patched sglang builds correct, optimal DDTree draft trees.

Run by the host's python as `python ddtree.py`, beside `_suite.py`, with a JSON object on
stdin ({"site_packages": ..., "options": {...}}, may be empty). Prints exactly one JSON
line (`_suite.Suite`) and exits 0 when every check passed, else 1. Stdlib + torch +
patched sglang.

The tree checks recompute everything from `parents` and the logits, never from
the builder's other outputs, so a builder that emits a wrong parent fails. They
take the ddtree_utils module as an argument so tests can drive them without sglang.
`registration` and `worker_class` import sglang: DDTREE parses and has its budget field,
and its create_worker returns the worker class sglang would build (none is built).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
import sys
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from _suite import Suite

SUITE = "ddtree"
SEED_LOGITS = [[5.0, 4.0, 1.0], [4.0, 2.0, 1.0]]
LARGE_VOCAB = 151_936
LARGE_DEPTHS = 15
LARGE_BUDGET = 256
TOLERANCE = 1e-6

Check = tuple[bool, str]


def _log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Return float64 log-softmax per row; all -inf rows stay all -inf."""
    rows = []
    for row in logits.double().cpu():
        rows.append(row if not bool(torch.isfinite(row).any()) else torch.log_softmax(row, -1))
    return torch.stack(rows)


def _ancestors(parents: list[int], node: int) -> set[int]:
    """Return node and all its ancestors by walking `parents` up to the root."""
    seen = {node}
    while parents[node] >= 0:
        node = parents[node]
        if node in seen:
            break  # a cycle; the parent-order check reports it
        seen.add(node)
    return seen


def find_topology_problems(tree: Any, logits: torch.Tensor, budget: int) -> list[str]:
    """Return what is wrong with `tree` for (logits, budget); empty when it is a valid optimum."""
    parents = list(tree.parents)
    tokens = [int(t) for t in tree.node_token_ids.tolist()]
    depths = [int(d) for d in tree.depths.tolist()]
    num_nodes = len(parents) - 1
    if len(tokens) != num_nodes or len(depths) != num_nodes or parents[:1] != [-1]:
        return [f"sizes: parents={len(parents)} tokens={len(tokens)} depths={len(depths)}"]
    problems = [f"parent of {i} is {p}" for i, p in enumerate(parents[1:], 1) if not 0 <= p < i]
    if problems:
        return problems
    log_probs = _log_probs(logits)
    num_depths = log_probs.shape[0]
    node_depth = [0, *depths]
    prefix_lp = [0.0]
    children: dict[int, list[int]] = {i: [] for i in range(num_nodes + 1)}
    for node in range(1, num_nodes + 1):
        parent, depth, token = parents[node], node_depth[node], tokens[node - 1]
        children[parent].append(token)
        if depth != node_depth[parent] + 1 or not 1 <= depth <= num_depths:
            problems.append(f"node {node}: depth {depth}, parent depth {node_depth[parent]}")
            return problems
        prefix_lp.append(prefix_lp[parent] + float(log_probs[depth - 1, token]))
        if prefix_lp[-1] == -math.inf:
            problems.append(f"node {node}: token {token} has -inf log-prob")
    for node, kids in children.items():
        if len(set(kids)) != len(kids):
            problems.append(f"node {node}: duplicate child tokens {kids}")
        mapped = dict(tree.child_maps[node])
        expected = {tokens[c - 1]: c for c in range(1, num_nodes + 1) if parents[c] == node}
        if mapped != expected:
            problems.append(f"node {node}: child_map {mapped} != {expected}")
    want = torch.zeros(num_nodes + 1, num_nodes + 1, dtype=torch.bool)
    for node in range(num_nodes + 1):
        want[node, sorted(_ancestors(parents, node))] = True
    if not torch.equal(tree.visibility.cpu().bool(), want):
        problems.append("visibility != ancestor closure of parents")
    if problems:
        return problems
    return _find_optimality_problems(parents, tokens, node_depth, prefix_lp, log_probs, budget)


def _find_optimality_problems(
    parents: list[int],
    tokens: list[int],
    node_depth: list[int],
    prefix_lp: list[float],
    log_probs: torch.Tensor,
    budget: int,
) -> list[str]:
    """Return problems with size or optimality (top-budget prefixes) of a valid tree.

    A prefix-closed set is optimal iff its least probable prefix is at least as
    probable as the best prefix left out, and the best left out hangs off a node.
    """
    num_depths = log_probs.shape[0]
    finite = torch.isfinite(log_probs).sum(dim=1).tolist()
    reachable, width = 0, 1
    for count in finite:
        width *= count
        reachable += width
        if reachable >= budget:
            break
    expected_size = min(budget, reachable)
    if len(parents) - 1 != expected_size:
        return [f"tree has {len(parents) - 1} nodes, expected {expected_size}"]
    k = min(len(parents), log_probs.shape[1])
    top_lp, top_ids = torch.topk(log_probs, k, dim=-1)
    best_out = -math.inf
    for node in range(len(parents)):
        depth = node_depth[node]
        if depth >= num_depths:
            continue
        taken = {tokens[c - 1] for c in range(1, len(parents)) if parents[c] == node}
        for lp, token in zip(top_lp[depth].tolist(), top_ids[depth].tolist(), strict=True):
            if token not in taken:
                best_out = max(best_out, prefix_lp[node] + lp)
                break
    worst_in = min(prefix_lp[1:], default=math.inf)
    if best_out > worst_in + TOLERANCE:
        return [f"not optimal: a left-out prefix has log-prob {best_out:.6f} > {worst_in:.6f}"]
    return []


def brute_force_best_sum(logits: torch.Tensor, budget: int) -> float:
    """Return the max prefix-probability sum over all prefix-closed trees of the tree's size."""
    probs = _log_probs(logits).exp().tolist()
    prefixes = [
        p
        for depth in range(1, len(probs) + 1)
        for p in itertools.product(range(len(probs[0])), repeat=depth)
        if all(probs[i][t] > 0 for i, t in enumerate(p))
    ]
    size = min(budget, len(prefixes))
    best = 0.0
    for subset in itertools.combinations(prefixes, size):
        chosen = set(subset)
        if all(len(p) == 1 or p[:-1] in chosen for p in subset):
            best = max(best, sum(math.prod(probs[i][t] for i, t in enumerate(p)) for p in subset))
    return best


def tree_prefix_sum(tree: Any, logits: torch.Tensor) -> float:
    """Return the sum of prefix probabilities of the tree's nodes, from parents and logits."""
    probs = _log_probs(logits).exp()
    prefix = [1.0]
    for node in range(1, len(tree.parents)):
        depth = int(tree.depths[node - 1])
        token = int(tree.node_token_ids[node - 1])
        prefix.append(prefix[tree.parents[node]] * float(probs[depth - 1, token]))
    return sum(prefix[1:])


def check_seed(utils: ModuleType) -> Check:
    """The seed's exact expectations on a 2x3 example with budget 4."""
    tree = utils.build_ddtree_tree_from_logits(torch.tensor(SEED_LOGITS), 4)
    walk = utils.follow_verified_tree(tree, [int(tree.node_token_ids[0]), 777, 888, 999, 111])
    ok = len(tree.parents) == 5 and tree.parents == [-1, 0, 1, 0, 3] and walk == ([0, 1], 777)
    return ok, f"parents={tree.parents} walk={walk}"


def check_random_topology(utils: ModuleType, cases: int = 40, seed: int = 0) -> Check:
    """Random small trees are valid and optimal (certificate) and match brute force."""
    gen = torch.Generator().manual_seed(seed)
    for case in range(cases):
        depths, vocab = 1 + case % 3, 2 + case % 3
        budget = case % 7
        logits = torch.randn(depths, vocab, generator=gen) * 2.0
        tree = utils.build_ddtree_tree_from_logits(logits, budget)
        problems = find_topology_problems(tree, logits, budget)
        if problems:
            return False, f"case {case}: {problems[:3]}"
        if depths * vocab <= 9:
            best = brute_force_best_sum(logits, budget)
            got = tree_prefix_sum(tree, logits)
            if abs(best - got) > TOLERANCE:
                return False, f"case {case}: prefix sum {got} != brute force {best}"
    return True, f"{cases} random trees valid and optimal"


def check_edge_cases(utils: ModuleType) -> Check:
    """Budget 0/1, budget > V, L == 1, -inf tokens and NaN rejection."""
    build = utils.build_ddtree_tree_from_logits
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.5, 0.1, 0.2]])
    empty = build(logits, 0)
    if empty.parents != [-1] or empty.visibility.shape != (1, 1):
        return False, f"budget 0: parents={empty.parents}"
    one = build(logits, 1)
    if one.parents != [-1, 0] or one.node_token_ids.tolist() != [1]:
        return False, f"budget 1: parents={one.parents} tokens={one.node_token_ids.tolist()}"
    wide = build(logits[:1], 10)
    if sorted(wide.node_token_ids.tolist()) != [0, 1, 2] or wide.parents != [-1, 0, 0, 0]:
        return False, f"L=1 budget>V: tokens={wide.node_token_ids.tolist()}"
    inf = float("-inf")
    masked = torch.tensor([[inf, 2.0, 1.0], [inf, inf, inf], [0.0, 0.0, 0.0]])
    tree = build(masked, 8)
    if tree.depths.max().item() != 1 or 0 in tree.node_token_ids.tolist() or len(tree.parents) != 3:
        return False, f"-inf: tokens={tree.node_token_ids.tolist()} parents={tree.parents}"
    problems = find_topology_problems(tree, masked, 8)
    if problems:
        return False, f"-inf: {problems[:3]}"
    try:
        build(torch.tensor([[1.0, float("nan")]]), 2)
    except ValueError:
        return True, "budget 0/1, budget > V, L = 1, -inf, NaN all handled"
    return False, "NaN logits did not raise ValueError"


def check_batched_walk(utils: ModuleType, seed: int = 1) -> Check:
    """The batched walk equals the single walk on mixed-size padded trees."""
    gen = torch.Generator().manual_seed(seed)
    trees, compiled, posteriors = [], [], []
    for b in range(6):
        tree = utils.build_ddtree_tree_from_logits(torch.randn(4, 5, generator=gen) * 3, 3 + 4 * b)
        trees.append(tree)
        compiled.append(utils.compile_ddtree_tree(tree, 7, 100))
        posteriors.append(torch.randint(0, 5, (len(tree.parents),), generator=gen))
    next_token, next_sibling, node_tokens = utils.stack_compiled_ddtrees(compiled)
    posterior = torch.full_like(node_tokens, -1)
    for b, post in enumerate(posteriors):
        posterior[b, : post.numel()] = post
    index, length, bonus = utils.follow_verified_trees_batched(
        next_token, next_sibling, node_tokens, posterior, max_depth=4
    )
    for b, tree in enumerate(trees):
        accepted, want_bonus = utils.follow_verified_tree(tree, posteriors[b])
        row = [i for i in index[b].tolist() if i >= 0]
        if row != accepted or int(length[b]) != len(accepted) - 1 or int(bonus[b]) != want_bonus:
            return False, f"row {b}: batched {row}/{int(bonus[b])} != {accepted}/{want_bonus}"
    return True, "6 padded trees walked identically"


def check_large_vocab(utils: ModuleType) -> Check:
    """A Qwen-sized vocabulary case is valid and optimal; reports the build time."""
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(LARGE_DEPTHS, LARGE_VOCAB, generator=gen) * 4.0
    utils.build_ddtree_tree_from_logits(logits, LARGE_BUDGET)  # warm-up
    start = time.perf_counter()
    tree = utils.build_ddtree_tree_from_logits(logits, LARGE_BUDGET)
    build_ms = (time.perf_counter() - start) * 1e3
    problems = find_topology_problems(tree, logits, LARGE_BUDGET)
    detail = f"L={LARGE_DEPTHS} V={LARGE_VOCAB} budget={LARGE_BUDGET}: build {build_ms:.1f} ms"
    return not problems, detail + (f"; {problems[:3]}" if problems else "")


def check_registration() -> Check:
    """The patched spec_info and server_args expose DDTREE."""
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpecInputType, SpeculativeAlgorithm

    algo = SpeculativeAlgorithm.from_string("DDTREE")
    lower = SpeculativeAlgorithm.from_string("ddtree")
    budget = server_args_fields(ServerArgs).get("speculative_ddtree_budget")
    ok = (
        algo.is_ddtree()
        and lower is algo
        and SpecInputType.DDTREE_VERIFY.name == "DDTREE_VERIFY"
        and budget is not None
        and budget.default is None
    )
    return ok, f"algo={algo} dflash_family={algo.is_dflash()} budget_field={budget is not None}"


def server_args_fields(server_args_cls: type) -> dict[str, Any]:
    """Return name -> field (with .default) of ServerArgs: a dataclass up to sglang 0.5.13,
    a msgspec Struct assembled from arg_groups/fields/ from 0.5.14 on."""
    if dataclasses.is_dataclass(server_args_cls):
        return {f.name: f for f in dataclasses.fields(server_args_cls)}
    import msgspec

    return {f.name: f for f in msgspec.structs.fields(server_args_cls)}


def check_worker_class() -> Check:
    """DDTREE's create_worker returns a class whose module imports; no worker is built.

    Fails with the exception's type and first line (and where it was raised): an sglang
    older than the carried code (ddtree 2.0.0 ported to 0.5.22 calls 0.5.23's
    get_platform_worker_cls) breaks here instead of at server start.
    """
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    server_args = build_unresolved_server_args(ServerArgs)
    try:
        worker_cls = SpeculativeAlgorithm.from_string("DDTREE").create_worker(server_args)
        if isinstance(worker_cls, type):
            importlib.import_module(worker_cls.__module__)
    except Exception as exc:  # the failure is the check's answer
        return False, describe_exception(exc)
    if not isinstance(worker_cls, type):
        return False, f"create_worker returned {worker_cls!r}, not a class"
    return True, f"{worker_cls.__module__}.{worker_cls.__qualname__}"


def build_unresolved_server_args(server_args_cls: type) -> Any:
    """Return a `server_args_cls` holding its field defaults (model_path ""), never resolved
    (no model, device or platform is read), with overlap scheduling disabled.

    Up to sglang 0.5.13 ServerArgs is a dataclass whose __post_init__ resolves the model, so
    the instance is made without __init__ and given each field's default. From 0.5.14 it is
    a msgspec Struct whose construction leaves resolution to `resolve_once`. Overlap is off
    as sglang's handler sets it for the DFlash family on 0.5.13 (there create_worker refuses
    DFLASH with overlap); on 0.5.23 DDTREE's worker serves both, so the class is the same.
    """
    if dataclasses.is_dataclass(server_args_cls):
        server_args: Any = object.__new__(server_args_cls)
        for field in dataclasses.fields(server_args_cls):
            if field.default_factory is not dataclasses.MISSING:
                setattr(server_args, field.name, field.default_factory())
            elif field.default is not dataclasses.MISSING:
                setattr(server_args, field.name, field.default)
        server_args.model_path = ""
    else:
        server_args = server_args_cls(model_path="")
    server_args.disable_overlap_schedule = True
    return server_args


def describe_exception(exc: BaseException) -> str:
    """Return "Type: first line of the message", then where it was raised (file:line)."""
    message = str(exc).splitlines()
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"\nraised at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {message[0] if message else ''}{where}"


def run_checks(suite: Suite, utils: ModuleType, with_registration: bool = True) -> list[dict]:
    """Run every check into `suite` (an exception fails its check); return the suite's checks.

    `with_registration` adds the checks that import sglang: registration, worker_class.
    """
    named: list[tuple[str, Callable[[], Check]]] = [
        ("seed", lambda: check_seed(utils)),
        ("random_topology", lambda: check_random_topology(utils)),
        ("edge_cases", lambda: check_edge_cases(utils)),
        ("batched_walk", lambda: check_batched_walk(utils)),
        ("large_vocab", lambda: check_large_vocab(utils)),
    ]
    if with_registration:
        named.append(("registration", check_registration))
        named.append(("worker_class", check_worker_class))
    for name, check in named:
        suite.run(name, check)
    return suite.checks


def run_suite(suite: Suite) -> None:
    """Import the host's (patched) ddtree_utils and run every check on it."""
    site_packages = suite.input.get("site_packages")
    if site_packages:
        sys.path.insert(0, site_packages)
    from sglang.srt.speculative import ddtree_utils

    suite.where = ddtree_utils.__file__  # the module the host's python really imported
    run_checks(suite, ddtree_utils)


if __name__ == "__main__":
    Suite(SUITE).run_body(run_suite)
