"""SGLang's own tree kernels (0.5.23; 0.5.13.post1's attention) against DDTree's references,
on the CPU under TRITON_INTERPRET=1 (about 75 s on 2 cores): the CPU test of the kernel
checks shipped with the `gpu` smoke suite (ddtree_deploy/smoke/_kernel_*.py and the helpers
they import), which that suite runs on a CUDA host with sglang 0.5.23.

The kernels run in a subprocess with the sandbox base env's python (torch + triton) and the
pristine sglang install on sys.path; that subprocess is `bench/gpu_check.py --self-test`,
so `make gpu-check`'s script is exercised on every run. Each check reports whether the
kernels agree with the reference and whether its negative control was caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ddtree_deploy.smoke._kernel_plan import CHECK_ORDER
from tests.support import REPO, load_module, load_smoke_script, utils_file

pytestmark = pytest.mark.kernels
CHECKS = list(CHECK_ORDER)


def kernel_env(version: str) -> tuple[Path, dict[str, str]]:
    """Return (python, env) running the base env with sglang `version` (+ its overlay)."""
    # A base env that cannot be built fails these tests (it once skipped them: a check that
    # CI could lose without a word); make test builds the same envs for the serving tests.
    from ddtree_sandbox import ensure_base_env

    base = ensure_base_env(version)
    paths = [str(p) for p in (base.overlay_dir, base.sglang_dir) if p]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONWARNINGS": "ignore",
        "TRITON_INTERPRET": "1",
    }
    return base.python, env


def run_lines(version: str, *args: str, expect_rc: int = 0) -> dict[str, dict]:
    """Run a script with the kernel env; return its JSON lines by check name."""
    python, env = kernel_env(version)
    proc = subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=900
    )
    assert proc.returncode == expect_rc, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {f"{r['check']}{r.get('budget', '')}": r for r in lines}


@pytest.fixture(scope="module")
def self_test() -> dict[str, dict]:
    """bench/gpu_check.py --self-test's records (every check on sglang 0.5.23)."""
    return run_lines("0.5.23", "bench/gpu_check.py", "--self-test")


@pytest.mark.parametrize("check", CHECKS)
def test_kernel_check_agrees_and_its_control_is_caught(self_test, check: str) -> None:
    record = self_test[check]
    assert record["agrees"], record
    assert record["control_caught"], record
    assert record["ok"] and record["sglang"] == "0.5.23"


def test_tree_equality_conditions(self_test) -> None:
    """UNO = ours for tie-free logits, temperature as logits / T, K above every rank; -inf:
    ours is UNO's first nodes; NaN: ours refuses, UNO drops the row to depth 1."""
    record = self_test["tree_equality"]
    assert record["inf_ours_is_prefix"] and record["temperature_ok"] and record["rank_rule_ok"]
    assert record["nan_ours"].startswith("ValueError") and record["nan_uno"]["nodes"] == 6
    assert record["flashinfer_standin"] is True


def test_self_test_times_both_builders(self_test) -> None:
    assert self_test["uno_vs_ours16"]["same_tree"] is True
    assert self_test["masked_verify16"]["seconds"] > 0


def test_hybrid_tree_verify_equals_a_per_node_reference_and_a_chain_scan_does_not(
    self_test,
) -> None:
    """The kernel-level proof under ddtree 2.2.x's hybrid path: sglang 0.5.23's Triton
    conv-update and GDN recurrent verify kernels, given a tree's first-child/next-sibling links
    (what 2.2.x's verify input carries), derive the parents and give every node exactly what a
    per-node torch reference gives along its root-to-node path (interpreted, fp32); without the
    links (a chain scan, what 2.1.x did) they do not: the negative control, in the same run."""
    record = self_test["hybrid_tree_verify"]
    assert record["parents_ok"], record
    assert record["conv_tree_err"] < 1e-5 and record["gdn_tree_err"] < 1e-5, record
    assert record["conv_chain_err"] > 1e-2 and record["gdn_chain_err"] > 1e-2, record
    assert record["ok"] and record["device"].startswith("cpu"), record


def test_gpu_check_refuses_without_cuda() -> None:
    python, env = kernel_env("0.5.23")
    proc = subprocess.run(
        [str(python), "bench/gpu_check.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 2 and "needs CUDA" in proc.stderr and not proc.stdout


def test_0_5_13_attention_with_tree_mask() -> None:
    """ddtree 1.1.0's target: sglang 0.5.13.post1's triton_ops extend attention."""
    oracle = utils_file(REPO / "patchsets" / "ddtree" / "1.1.0")
    script = "ddtree_deploy/smoke/_kernel_checks.py"
    records = run_lines("0.5.13.post1", script, "--oracle", str(oracle))
    assert list(records) == ["attention"]
    assert records["attention"]["ok"] and records["attention"]["sglang"] == "0.5.13.post1"


# ---------------------------------------------------------------- the mapping (pure torch)

MAPPING = load_smoke_script("_uno_mapping", "_uno_mapping.py")
FAST = load_module("_payload119_ddtree_utils", utils_file(REPO / "patchsets/ddtree/1.1.9"))


@pytest.mark.parametrize("seed", range(5))
def test_mapping_round_trips_our_trees(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(5, 30, generator=gen) * 2.0
    tree = FAST.build_ddtree_tree_from_logits(logits, 25)
    tokens, edges, parent_list = MAPPING.uno_layout_from_tree(
        tree.node_token_ids.tolist(), tree.parents, 25, 5
    )
    back = MAPPING.tree_from_uno_row(tokens, edges, 25)
    assert back.parents == tree.parents and back.depths == tree.depths.tolist()
    assert back.node_tokens == tree.node_token_ids.tolist()
    assert parent_list[0] == -1 and parent_list[1 : len(edges)].tolist() == edges[:-1].tolist()


def test_mapping_refuses_what_the_layout_cannot_hold() -> None:
    with pytest.raises(ValueError, match="rank"):
        MAPPING.uno_layout_from_tree([1, 2, 3], [-1, 0, 0, 0], 2, 3)
    with pytest.raises(ValueError, match="parent"):
        MAPPING.tree_from_uno_row(torch.tensor([4, 5]), torch.tensor([0, 9]), 3)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
