"""Smoke suite `gpu`: DDTree building and the batched walk agree between CUDA and CPU.

Run by the host's python as `python smoke/gpu.py` with a JSON object on stdin
({"site_packages": ..., "options": {"gpus": N}}, may be empty). Prints exactly one
JSON line. Without CUDA (or with options.gpus == 0) it reports skipped, never passed,
and exits 0; otherwise it exits 0 when every check passed, else 1.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

SUITE = "gpu"
VOCAB = 151_936
DEPTHS = 15
BUDGETS = (16, 64, 256)
TIMED_CALLS = 10
TIE_TOLERANCE = 1e-4

Check = tuple[bool, str]


def _tree_key(tree: Any) -> tuple[list[int], list[int], list[int]]:
    """Return the comparable content of a tree: parents, tokens and depths."""
    return list(tree.parents), tree.node_token_ids.tolist(), tree.depths.tolist()


def _prefix_set(tree: Any) -> set[tuple[int, ...]]:
    """Return the tree's nodes as token prefixes, so node order does not matter."""
    tokens = tree.node_token_ids.tolist()
    prefixes: list[tuple[int, ...]] = [()]
    for node in range(1, len(tree.parents)):
        prefixes.append(prefixes[tree.parents[node]] + (tokens[node - 1],))
    return set(prefixes[1:])


def compare_trees(cpu_tree: Any, gpu_tree: Any) -> Check:
    """Equal trees pass; differing ones pass only as float ties (same size and prefix mass)."""
    if _tree_key(cpu_tree) == _tree_key(gpu_tree):
        return True, "equal"
    if len(cpu_tree.parents) != len(gpu_tree.parents):
        return False, f"sizes {len(cpu_tree.parents)} != {len(gpu_tree.parents)}"
    cpu_mass = cpu_tree.prefix_log_probs.exp().sum().item()
    gpu_mass = gpu_tree.prefix_log_probs.cpu().exp().sum().item()
    moved = len(_prefix_set(cpu_tree) ^ _prefix_set(gpu_tree)) // 2
    if abs(cpu_mass - gpu_mass) <= TIE_TOLERANCE * max(cpu_mass, 1e-12):
        return True, f"equal up to float ties ({moved} prefixes swapped)"
    return False, f"differ: {moved} prefixes, mass {cpu_mass:.6f} vs {gpu_mass:.6f}"


def check_build_matches(utils: ModuleType, device: torch.device) -> Check:
    """Trees built from the same logits on CUDA and CPU agree; reports per-call build time."""
    gen = torch.Generator().manual_seed(3)
    logits_cpu = torch.randn(DEPTHS, VOCAB, generator=gen) * 4.0
    logits_gpu = logits_cpu.to(device)
    notes = []
    for budget in BUDGETS:
        cpu_tree = utils.build_ddtree_tree_from_logits(logits_cpu, budget)
        gpu_tree = utils.build_ddtree_tree_from_logits(logits_gpu, budget)
        same, how = compare_trees(cpu_tree, gpu_tree)
        if not same:
            return False, f"budget {budget}: {how}"
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(TIMED_CALLS):
            utils.build_ddtree_tree_from_logits(logits_gpu, budget)
        per_call_ms = (time.perf_counter() - start) * 1e3 / TIMED_CALLS
        notes.append(f"b={budget}: {how}, {per_call_ms:.2f} ms/call")
    return True, "; ".join(notes)


def check_walk_matches(utils: ModuleType, device: torch.device) -> Check:
    """The batched walk gives identical results on CUDA and CPU; reports its time."""
    gen = torch.Generator().manual_seed(4)
    compiled, posteriors = [], []
    for b in range(48):
        logits = torch.randn(DEPTHS, 64, generator=gen) * 4.0
        tree = utils.build_ddtree_tree_from_logits(logits, 8 + (b * 7) % 57)
        compiled.append(utils.compile_ddtree_tree(tree, 5, 0))
        # Follow the draft's own tokens most of the time so walks go deep.
        post = torch.randint(0, 64, (len(tree.parents),), generator=gen)
        for node, kids in enumerate(tree.child_maps):
            if kids and torch.rand(1, generator=gen).item() < 0.8:
                post[node] = min(kids, key=kids.get)
        posteriors.append(post)
    next_token, next_sibling, node_tokens = utils.stack_compiled_ddtrees(compiled)
    posterior = torch.full_like(node_tokens, -1)
    for b, post in enumerate(posteriors):
        posterior[b, : post.numel()] = post
    cpu_out = utils.follow_verified_trees_batched(
        next_token, next_sibling, node_tokens, posterior, max_depth=DEPTHS
    )
    gpu_in = [t.to(device) for t in (next_token, next_sibling, node_tokens, posterior)]
    gpu_out = utils.follow_verified_trees_batched(*gpu_in, max_depth=DEPTHS)
    names = ("accept_index", "accept_length", "bonus")
    for name, a, b in zip(names, cpu_out, gpu_out, strict=True):
        if not torch.equal(a, b.cpu()):
            return False, f"{name} differs between CPU and CUDA"
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(TIMED_CALLS):
        utils.follow_verified_trees_batched(*gpu_in, max_depth=DEPTHS)
    torch.cuda.synchronize(device)
    per_call_ms = (time.perf_counter() - start) * 1e3 / TIMED_CALLS
    mean_len = cpu_out[1].float().mean().item()
    return True, f"batch 48 equal; mean accept {mean_len:.2f}; {per_call_ms:.2f} ms/walk"


def _result(checks: list[dict[str, Any]], details: str, start: float, skipped: bool) -> dict:
    """Return the suite's JSON object."""
    return {
        "suite": SUITE,
        "passed": bool(checks) and not details and not skipped,
        "skipped": skipped,
        "checks": checks,
        "duration_s": round(time.perf_counter() - start, 3),
        "details": details,
    }


def main() -> int:
    """Read the request, run or skip the suite, print one JSON line; return the exit code."""
    start = time.perf_counter()
    checks: list[dict[str, Any]] = []
    try:
        raw = sys.stdin.read() if not sys.stdin.isatty() else ""
        request = json.loads(raw) if raw.strip() else {}
        request = request if isinstance(request, dict) else {}
        options = request.get("options") or {}
        if options.get("gpus") == 0 or not torch.cuda.is_available():
            print(json.dumps(_result([], "skipped: no GPU", start, skipped=True)))
            return 0
        if request.get("site_packages"):
            sys.path.insert(0, request["site_packages"])
        from sglang.srt.speculative import ddtree_utils

        device = torch.device("cuda", 0)
        named: list[tuple[str, Callable[[], Check]]] = [
            ("build_cuda_equals_cpu", lambda: check_build_matches(ddtree_utils, device)),
            ("walk_cuda_equals_cpu", lambda: check_walk_matches(ddtree_utils, device)),
        ]
        for name, check in named:
            try:
                passed, detail = check()
            except Exception as exc:  # a smoke check reports, never crashes
                passed, detail = False, f"{type(exc).__name__}: {exc}"
            checks.append({"name": name, "passed": bool(passed), "detail": detail})
        details = "; ".join(f"{c['name']}: {c['detail']}" for c in checks if not c["passed"])
    except BaseException:  # always answer with the JSON line
        details = "suite crashed: " + traceback.format_exc()[-1500:]
    result = _result(checks, details, start, skipped=False)
    print(json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
