"""Time the DDTree builder and the batched verify walk; print a small table.

Usage: python3 bench/bench_ddtree_builder.py [--repeats N] [--threads T]
Loads ddtree_utils.py from where the patchset keeps it (no sglang needed). Runs on
the CPU, and on CUDA too when it is available. Times are medians per call in ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import load_module, utils_file  # noqa: E402 - the product's source resolver

DEPTHS = 15
VOCAB = 151_936
BUDGETS = (16, 64, 256, 1024)
BATCHES = (1, 8, 48)
WALK_BUDGETS = (64, 256)


def load_utils() -> ModuleType:
    """Return ddtree_1.0.0's ddtree_utils, loaded from where its bytes live (the shared store)."""
    return load_module("_bench_ddtree_utils", utils_file(REPO / "patchsets/ddtree/1.0.0"))


def time_ms(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Return the median wall time of fn() in ms, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def walk_inputs(
    utils: ModuleType, batch: int, budget: int, device: torch.device
) -> tuple[torch.Tensor, ...]:
    """Return padded walk inputs for `batch` trees whose posterior mostly follows the draft."""
    gen = torch.Generator().manual_seed(batch)
    compiled, posteriors = [], []
    for _ in range(batch):
        tree = utils.build_ddtree_tree_from_logits(
            torch.randn(DEPTHS, 512, generator=gen) * 4.0, budget
        )
        compiled.append(utils.compile_ddtree_tree(tree, 1, 0))
        post = torch.randint(0, 512, (len(tree.parents),), generator=gen)
        for node, kids in enumerate(tree.child_maps):
            if kids:
                post[node] = min(kids, key=kids.get)
        posteriors.append(post)
    next_token, next_sibling, node_tokens = utils.stack_compiled_ddtrees(compiled)
    posterior = torch.full_like(node_tokens, -1)
    for b, post in enumerate(posteriors):
        posterior[b, : post.numel()] = post
    return tuple(t.to(device) for t in (next_token, next_sibling, node_tokens, posterior))


def bench_device(utils: ModuleType, device: torch.device, repeats: int) -> list[str]:
    """Return table rows for one device."""
    logits = (torch.randn(DEPTHS, VOCAB, generator=torch.Generator().manual_seed(0)) * 4.0).to(
        device
    )
    rows = []
    for budget in BUDGETS:
        build_ms = time_ms(
            lambda b=budget: utils.build_ddtree_tree_from_logits(logits, b), repeats, device
        )
        tree = utils.build_ddtree_tree_from_logits(logits, budget)
        compile_ms = time_ms(
            lambda t=tree: utils.compile_ddtree_tree(t, 1, 100, device=device), repeats, device
        )
        rows.append(
            f"{device.type:<5} build   L={DEPTHS} V={VOCAB} budget={budget:<5} "
            f"{build_ms:8.2f} ms   (+compile {compile_ms:.2f} ms)"
        )
    for budget in WALK_BUDGETS:
        for batch in BATCHES:
            inputs = walk_inputs(utils, batch, budget, device)
            walk_ms = time_ms(
                lambda i=inputs: utils.follow_verified_trees_batched(*i, max_depth=DEPTHS),
                repeats,
                device,
            )
            rows.append(
                f"{device.type:<5} walk    batch={batch:<3} n+1={inputs[0].shape[1]:<5} "
                f"max_depth={DEPTHS}       {walk_ms:8.2f} ms"
            )
    return rows


def main() -> None:
    """Parse options, run the benchmark on each available device, print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    utils = load_utils()
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda", 0))
    print(f"torch {torch.__version__}, cpu threads {torch.get_num_threads()}")
    for device in devices:
        for row in bench_device(utils, device, args.repeats):
            print(row)


if __name__ == "__main__":
    main()
