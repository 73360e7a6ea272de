"""SGLang's own tree kernels against DDTree's builder, compile and walk: the check registry,
check (a) tree equality, and a CLI printing one JSON line per check.

Run by a python with torch, triton and an installed sglang: the `gpu` smoke suite on a CUDA
host (oracle = the host's installed ddtree_utils), bench/gpu_check.py (`make gpu-check`), or
by hand (the sandbox base env on the CPU under TRITON_INTERPRET=1):

    python ddtree_deploy/smoke/_kernel_checks.py --oracle PATH/ddtree_utils.py [--device cuda]

Each check returns _kernel_plan.record(...): `ok` is True only when the kernels agree with the
reference on every case AND the check's negative control (a dropped mask, a shifted
position, a wrong parent...) was caught. On an sglang without the tree kernels
(0.5.13.post1) only the attention check runs.
"""

from __future__ import annotations

import argparse
import functools
import importlib.machinery
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import _step_checks
import _toy_decode
import _tree_ops as tree_ops
import torch
from _kernel_plan import CHECK_ORDER, record
from _kernel_timings import TimingShapes, time_kernels
from _sglang_kernels import Kernels, load_kernels
from _uno_mapping import TreeNodes, sibling_ranks


def load_oracle(path: Path) -> ModuleType:
    """Return our ddtree_utils.py (the patchset's stored bytes) as module `_ddtree_oracle`."""
    loader = importlib.machinery.SourceFileLoader("_ddtree_oracle", str(path))
    spec = importlib.util.spec_from_file_location("_ddtree_oracle", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_ddtree_oracle"] = module
    loader.exec_module(module)
    return module


def same_tree(ours, tree: TreeNodes, nodes: int | None = None) -> bool:
    """True when `tree`'s first `nodes` nodes (default all) are our DDTree's, in order."""
    count = len(tree.node_tokens) if nodes is None else nodes
    return (
        ours.node_token_ids.tolist() == tree.node_tokens[:count]
        and ours.parents == tree.parents[: count + 1]
        and ours.depths.tolist() == tree.depths[:count]
    )


def tie_free(gen: torch.Generator, oracle, batch: int, depths: int, vocab: int, budget: int):
    """Return [B, L, V] logits whose best budget + 1 prefixes (and row top-k values) are at
    least 1e-3 apart: fp32 (UNO) and fp64 (ours) prefix sums then order them the same."""
    rows: list[torch.Tensor] = []
    while len(rows) < batch:
        logits = torch.randn(depths, vocab, generator=gen) * 3.0
        top = torch.topk(logits, min(budget + 1, vocab), dim=-1).values
        sums = oracle.build_ddtree_tree_from_logits(logits, budget + 1).prefix_log_probs
        gaps = [torch.diff(torch.sort(x).values).min() for x in (*top, sums) if x.numel() > 1]
        if all(float(g) > 1e-3 for g in gaps):
            rows.append(logits)
    return torch.stack(rows)


def check_tree_equality(kernels: Kernels, oracle, device: str, quick: bool) -> dict:
    """(a) UNO with candidate_top_k = budget builds our tree; ties, -inf, temperature, K."""
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(16)
    shapes = (
        [(2, 8, 7), (3, 40, 9), (4, 200, 20), (2, 64, 44)]
        if quick
        else [
            (2, 8, 7),
            (3, 40, 9),
            (4, 200, 20),
            (2, 64, 44),
            (15, 151_936, 16),
            (15, 151_936, 44),
        ]
    )
    batch = 3
    ok, cases = True, 0
    for depths, vocab, budget in shapes:
        logits = tie_free(gen, oracle, batch, depths, vocab, budget)
        roots = torch.randint(0, vocab, (batch,), generator=gen)
        _, trees = tree_ops.build_uno(kernels, roots.to(device), logits.to(device), budget, budget)
        for b in range(batch):
            cases += 1
            ok &= same_tree(oracle.build_ddtree_tree_from_logits(logits[b], budget), trees[b])
    # Ties: integer logits (equal values in a row, equal prefix sums across rows).
    tie_cases = tie_equal = 0
    for _ in range(8):
        logits = torch.randint(-3, 3, (batch, 3, 6), generator=gen).float()
        _, trees = tree_ops.build_uno(
            kernels, torch.zeros(batch, dtype=torch.long).to(device), logits.to(device), 6, 6
        )
        for b in range(batch):
            tie_cases += 1
            tie_equal += same_tree(oracle.build_ddtree_tree_from_logits(logits[b], 6), trees[b])
    # -inf: ours stops at the last finite prefix; UNO fills Q - 1 nodes, ours first.
    inf_prefix = True
    logits = tie_free(gen, oracle, batch, 2, 12, 12)
    logits[:, :, 2:] = float("-inf")
    logits[1, 1, :] = float("-inf")
    _, trees = tree_ops.build_uno(
        kernels, torch.zeros(batch, dtype=torch.long).to(device), logits.to(device), 12, 12
    )
    inf_sizes = []
    for b in range(batch):
        ours = oracle.build_ddtree_tree_from_logits(logits[b], 12)
        inf_sizes.append(len(ours.parents) - 1)
        inf_prefix &= same_tree(ours, trees[b], len(ours.parents) - 1)
    # Temperature T: UNO(logits, T) == ours(logits / T); T = 0 (greedy) means T = 1.
    logits = tie_free(gen, oracle, batch, 3, 30, 9) * 0.7
    temp_ok = True
    for temperature, scale in ((0.7, 0.7), (0.0, 1.0)):
        _, trees = tree_ops.build_uno(
            kernels,
            torch.zeros(batch, dtype=torch.long).to(device),
            logits.to(device),
            9,
            9,
            temperature,
        )
        for b in range(batch):
            temp_ok &= same_tree(
                oracle.build_ddtree_tree_from_logits(logits[b] / scale, 9), trees[b]
            )
    # candidate_top_k < budget: equal exactly when our tree uses no rank >= K.
    rank_rule = True
    logits = tie_free(gen, oracle, batch, 4, 50, 12)
    for top_k in (4, 6, 12):
        _, trees = tree_ops.build_uno(
            kernels, torch.zeros(batch, dtype=torch.long).to(device), logits.to(device), 12, top_k
        )
        for b in range(batch):
            ours = oracle.build_ddtree_tree_from_logits(logits[b], 12)
            max_rank = max(tree_ops_ranks(ours.parents))
            rank_rule &= same_tree(ours, trees[b]) == (max_rank < top_k)
    # NaN: ours raises; UNO builds a tree (its log-probs turn NaN into -inf).
    nan_logits = tie_free(gen, oracle, 1, 3, 12, 6)
    nan_logits[0, 1, 5] = float("nan")
    try:
        oracle.build_ddtree_tree_from_logits(nan_logits[0], 6)
        ours_nan = "built a tree"
    except ValueError as error:
        ours_nan = f"ValueError: {error}"
    _, nan_trees = tree_ops.build_uno(
        kernels, torch.zeros(1, dtype=torch.long).to(device), nan_logits.to(device), 6, 6
    )
    as_inf = oracle.build_ddtree_tree_from_logits(torch.nan_to_num(nan_logits[0], nan=-1e30), 6)
    nan_uno = {
        "nodes": len(nan_trees[0].node_tokens),
        "depths": nan_trees[0].depths,
        "equals_ours_with_nan_as_-inf": same_tree(as_inf, nan_trees[0]),
    }
    # Negative control: one node moved to another parent is not our tree.
    ours = oracle.build_ddtree_tree_from_logits(logits[0], 12)
    moved = list(trees[0].parents)
    moved[-1] = 0 if moved[-1] else 1
    wrong = TreeNodes(trees[0].node_tokens, moved, trees[0].depths, trees[0].ranks)
    caught = same_tree(ours, trees[0]) and not same_tree(ours, wrong)
    return record(
        "tree_equality",
        started,
        ok and inf_prefix and temp_ok and rank_rule,
        caught,
        cases,
        ties_equal=f"{tie_equal}/{tie_cases}",
        inf_sizes=inf_sizes,
        inf_ours_is_prefix=inf_prefix,
        temperature_ok=temp_ok,
        rank_rule_ok=rank_rule,
        nan_ours=ours_nan,
        nan_uno=nan_uno,
        flashinfer_standin=kernels.flashinfer_standin,
    )


def tree_ops_ranks(parents: list[int]) -> list[int]:
    """Return sibling ranks of nodes 1..n (0 for a root-only tree)."""
    return sibling_ranks(parents) or [0]


def all_checks() -> dict[str, Callable[..., dict]]:
    """Return the checks by name, in CHECK_ORDER."""
    checks = {"tree_equality": check_tree_equality, **_step_checks.CHECKS, **_toy_decode.CHECKS}
    assert tuple(checks) == CHECK_ORDER, f"{tuple(checks)} != {CHECK_ORDER}"
    return checks


def check_names(kernels: Kernels, only: list[str] | None = None) -> list[str]:
    """Return the checks to run on `kernels`, in order: `only` (default all), and only the
    attention check on an sglang without the tree kernels."""
    names = list(only or CHECK_ORDER)
    return names if kernels.uno is not None else [n for n in names if n == "attention"]


def run_check(kernels: Kernels, oracle: ModuleType, device: str, name: str, full: bool) -> dict:
    """Run check `name` on `device` ("cpu" or "cuda"); full adds the V=151936 shapes.
    Returns its record with the sglang version added."""
    result = all_checks()[name](kernels, oracle, device, not full)
    result["sglang"] = kernels.version
    return result


def run_checks(
    kernels: Kernels, oracle: ModuleType, device: str, full: bool, only: list[str] | None = None
) -> Iterator[dict]:
    """Yield each check's record in order (see run_check)."""
    for name in check_names(kernels, only):
        yield run_check(kernels, oracle, device, name, full)


Step = tuple[str, Callable[[], list[dict]]]


def kernel_steps(
    kernels: Kernels, oracle: ModuleType, device: str, full: bool, shapes: TimingShapes
) -> list[Step]:
    """Return (name, run) per check in order, then ("timings", run): what `make gpu-check`
    prints and what the `gpu` smoke suite records, one step at a time. Each run() returns
    its records; a step failed when one of them is not `ok`."""
    steps: list[Step] = [
        (name, functools.partial(lambda n: [run_check(kernels, oracle, device, n, full)], name))
        for name in check_names(kernels)
    ]
    if kernels.uno is not None:  # the timings need 0.5.23's UNO builder
        steps.append(("timings", lambda: time_kernels(kernels, oracle, device, shapes)))
    return steps


def main(argv: list[str] | None = None) -> int:
    """Run the checks; print one JSON line each; exit 0 when all are ok."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", type=Path, required=True, help="our ddtree_utils.py")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default="", help="comma-separated check names")
    parser.add_argument("--full", action="store_true", help="also V=151936 shapes")
    args = parser.parse_args(argv)
    kernels = load_kernels(standin=args.device == "cpu")
    oracle = load_oracle(args.oracle)
    failed = 0
    only = args.only.split(",") if args.only else None
    for result in run_checks(kernels, oracle, args.device, args.full, only):
        print(json.dumps(result), flush=True)
        failed += not result["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
