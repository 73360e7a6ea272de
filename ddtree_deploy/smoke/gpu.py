"""Smoke suite `gpu`: DDTree building, the batched walk and (from ddtree 1.1.0) the
DFlash worker's DDTree tensor logic agree between CUDA and CPU; on sglang 0.5.23, SGLang's
own tree kernels agree with the host's DDTree code on CUDA (`kernel_*`, see below).

Run by the host's python as `python gpu.py`, beside `_suite.py`, with a JSON object on
stdin ({"site_packages": ..., "options": {"gpus": N}}, may be empty). Prints exactly one
JSON line (`_suite.Suite`). On a host declared without GPUs (options.gpus == 0), or one that
declares nothing and has no CUDA, it reports skipped, never passed, and exits 0. A host
declared WITH GPUs (gpus > 0) where CUDA is not usable, or shows fewer devices than declared,
fails (`cuda_usable`): a broken GPU host must not pass as "skipped". Otherwise it exits 0 when
every check passed, else 1.

Kernel checks (only when the installed sglang is 0.5.23 with its UNO tree builder,
_kernel_plan.kernel_checks_apply): `kernel_import` (the kernels import, real flashinfer),
then one `kernel_<name>` per check of _kernel_checks.py (UNO tree = our tree, build_tree's
mask/positions/links = our compile, greedy verify = our walk, tree-masked extend attention
= SDPA, accepted KV slots, a toy decode loop = plain greedy), each failing when its negative
control is not caught; its detail is the check's record. `kernel_timings`: UNO vs our
builder at V=151936 and tree-masked verify attention (bf16), medians in its detail. No
kernel check starts after _kernel_plan.SUITE_BUDGET_S seconds of them; one left out fails,
saying so (_kernel_suite.py).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from types import ModuleType
from typing import Any

import torch
from _kernel_suite import run_kernel_checks
from _suite import Suite

SUITE = "gpu"
VOCAB = 151_936
DEPTHS = 15
BUDGETS = (16, 64, 256)
TIMED_CALLS = 10
TIE_TOLERANCE = 1e-4
WORKER_BATCH = 48
WORKER_BUDGET = 64
WORKER_BLOCK = 16
WORKER_HIDDEN = 256
WORKER_VOCAB = 4096

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


def _sync(device: torch.device) -> None:
    """Wait for `device` (a no-op on the CPU), so wall-clock times are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _worker_step(wu: ModuleType, utils: ModuleType, packed: Any, prefixes: list[int], logits):
    """Run the verify-side worker logic once; return every tensor it decides."""
    mask = wu.build_ddtree_custom_mask(packed.tree_mask, prefixes)
    posterior = logits.argmax(-1).view(-1, packed.width)
    walk = utils.follow_verified_trees_batched(
        packed.next_token, packed.next_sibling, packed.walk_tokens, posterior, packed.max_depth
    )
    tokens = wu.collect_accepted_tokens(packed.walk_tokens, *walk)
    commit = torch.tensor([len(t) for t in tokens], device=logits.device)
    rows = wu.select_accepted_rows(walk[0], commit, packed.width)
    out_cache_loc = torch.arange(posterior.numel(), device=logits.device) + 7
    keep, free = wu.split_ddtree_kv_slots(out_cache_loc, rows)
    return {"mask": mask, "accept_index": walk[0], "rows": rows, "keep": keep, "free": free}, tokens


def check_worker_logic_matches(wu: ModuleType, utils: ModuleType, device: torch.device) -> Check:
    """The DDTree verify step of the DFlash worker gives CPU results on `device`; reports times.

    Batch 48, budget 64 (verify width 65), mixed tree sizes; draft logits, custom mask,
    greedy walk, committed tokens, accepted rows and KV keep/free slots must be equal,
    and top-k=1 sampling must be the argmax. Also times building 48 trees from
    full-vocabulary draft logits on `device`, the per-step host cost of DDTree.
    """
    gen = torch.Generator().manual_seed(6)
    width = WORKER_BUDGET + 1
    hidden = torch.randn(WORKER_BATCH, WORKER_BLOCK, WORKER_HIDDEN, generator=gen)
    weight = torch.randn(WORKER_VOCAB, WORKER_HIDDEN, generator=gen) / WORKER_HIDDEN**0.5
    draft = wu.compute_draft_logits(hidden, weight)
    if not torch.allclose(
        draft, wu.compute_draft_logits(hidden.to(device), weight.to(device)).cpu(), atol=1e-3
    ):
        return False, "draft logits differ"
    prefixes = [int(p) for p in torch.randint(1, 4000, (WORKER_BATCH,), generator=gen)]
    compiled = [
        utils.compile_ddtree_tree(
            utils.build_ddtree_tree_from_logits(draft[b] * 4.0, 1 + (b * 13) % WORKER_BUDGET),
            1 + b,
            prefixes[b],
        )
        for b in range(WORKER_BATCH)
    ]
    packed_cpu = wu.pack_ddtree_verify_batch(compiled, width)
    target = torch.randn(WORKER_BATCH * width, WORKER_VOCAB, generator=gen)
    want, want_tokens = _worker_step(wu, utils, packed_cpu, prefixes, target)
    target_dev = target.to(device)
    got, got_tokens = _worker_step(wu, utils, packed_cpu.to(device), prefixes, target_dev)
    _sync(device)
    start = time.perf_counter()
    _worker_step(wu, utils, packed_cpu.to(device), prefixes, target_dev)
    _sync(device)
    step_ms = (time.perf_counter() - start) * 1e3
    for name, tensor in want.items():
        if not torch.equal(tensor, got[name].cpu()):
            return False, f"{name} differs between CPU and {device.type}"
    if got_tokens != want_tokens:
        return False, f"committed tokens differ between CPU and {device.type}"
    ones = torch.ones(WORKER_BATCH, device=device)
    top1 = wu.sample_ddtree_posterior(
        target_dev, width, ones, ones.long(), ones, torch.zeros_like(ones)
    )
    if not torch.equal(top1.cpu(), target.argmax(-1).view(-1, width)):
        return False, "top-k 1 sampling is not the argmax"
    big = torch.randn(WORKER_BLOCK - 1, VOCAB, generator=gen).to(device) * 4.0
    _sync(device)
    start = time.perf_counter()
    for _ in range(WORKER_BATCH):
        utils.build_ddtree_tree_from_logits(big, WORKER_BUDGET)
    build_ms = (time.perf_counter() - start) * 1e3
    accepted = sum(len(t) - 1 for t in want_tokens) / WORKER_BATCH
    return True, (
        f"batch {WORKER_BATCH} width {width} equal; mean accept {accepted:.2f}; "
        f"verify-side step {step_ms:.2f} ms; "
        f"{WORKER_BATCH} tree builds (V={VOCAB}) {build_ms:.1f} ms"
    )


def cuda_usable(declared: int) -> tuple[bool, str]:
    """Whether CUDA works here as the inventory says (``declared`` GPUs): the detail names
    what is missing (a CPU-only torch build, no device, fewer devices than declared)."""
    if torch.version.cuda is None:
        return False, (
            f"host declares gpus = {declared} but torch {torch.__version__} is a CPU-only build"
        )
    if not torch.cuda.is_available():
        return False, (
            f"host declares gpus = {declared} but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}: no driver or no device)"
        )
    seen = torch.cuda.device_count()
    if seen < declared:
        return False, f"host declares gpus = {declared} but CUDA sees {seen}"
    return True, f"{seen} CUDA device(s): {torch.cuda.get_device_name(0)}"


def run_suite(suite: Suite) -> None:
    """Skip on a host without GPUs; fail a declared GPU host whose CUDA is not usable; else
    compare the host's (patched) DDTree code on CUDA and CPU."""
    declared = (suite.input.get("options") or {}).get("gpus")
    if declared == 0 or (declared is None and not torch.cuda.is_available()):
        suite.finish(skipped_reason="skipped: no GPU")
    if declared:
        usable = suite.run("cuda_usable", lambda: cuda_usable(int(declared)))
        if not usable:
            suite.finish()
    if suite.input.get("site_packages"):
        sys.path.insert(0, suite.input["site_packages"])
    from sglang.srt.speculative import ddtree_utils

    device = torch.device("cuda", 0)
    suite.run("build_cuda_equals_cpu", lambda: check_build_matches(ddtree_utils, device))
    suite.run("walk_cuda_equals_cpu", lambda: check_walk_matches(ddtree_utils, device))
    if importlib.util.find_spec("sglang.srt.speculative.ddtree_worker_utils"):
        from sglang.srt.speculative import ddtree_worker_utils as wu

        suite.run(
            "worker_cuda_equals_cpu",
            lambda: check_worker_logic_matches(wu, ddtree_utils, device),
        )
    run_kernel_checks(suite, ddtree_utils)


if __name__ == "__main__":
    Suite(SUITE).run_body(run_suite)
