"""ddtree 2.1.3: 2.1.2 that refuses hybrid linear-attention/Mamba targets at start again.

Why the refusal went missing: 1.x refused a hybrid target in ``find_ddtree_restriction_errors``
(1.x's ``ddtree_worker_utils.py``, called by 1.x's ``check_ddtree_worker``). 2.1.0 wrote new
start-up checks for DDTreeWorkerV2 (``ddtree_checks.find_ddtree_v2_errors``) and carried the
1.x file along unchanged as a shared blob, so the old refusal still existed but nothing called
it. The test that would have caught it: every refusal 1.x's checks take a setting for is a
setting of the 2.x checks, and the 2.x worker passes each one (read from the sources, so it
needs neither torch nor sglang). Its negative control is 2.1.2 itself (hybrid_mamba lost).
Serving: tests/serving_hybrid (a real 0.5.23 server with a hybrid target refuses 2.1.3).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from ddtree_deploy.patchset import check_sources, load_patchset
from tests.ddtree.gnu_patch import assert_diffs_apply_at_zero_fuzz, extract_sglang
from tests.support import REPO, load_module, patchset_file

DDTREE = REPO / "patchsets" / "ddtree"
CHECKS = "sglang/srt/speculative/ddtree_checks.py"
WORKER = "sglang/srt/speculative/ddtree_worker_v2.py"
V1_UTILS = "sglang/srt/speculative/ddtree_worker_utils.py"

# 1.x's setting -> the 2.x setting that refuses the same thing. An extended LM head: the 2.x
# worker slices the base vocabulary itself (shard_indices.num_org_elements); a sharded one
# exists only with --tp-size > 1, which tp_size refuses.
V1_TO_V2 = {
    "page_size": "page_size",
    "tp_size": "tp_size",
    "attention_backend": "attention_backend",
    "cuda_graph": "cuda_graphs",
    "hybrid_mamba": "hybrid_target",
    "lm_head_sharded_or_extended": "tp_size",
}


def keyword_parameters(path: Path, function: str) -> set[str]:
    """The keyword-only parameter names of ``function`` defined in the source at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return {a.arg for a in node.args.kwonlyargs}
    raise AssertionError(f"{path}: no function {function}")


def passed_keywords(path: Path, function: str) -> set[str]:
    """The keywords of every call to ``function`` in the source at ``path`` (one call)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == function
    ]
    assert len(calls) == 1, f"{path}: {len(calls)} calls of {function}"
    return {k.arg for k in calls[0].keywords if k.arg is not None}


def lost_refusals(version: str) -> set[str]:
    """The 1.x settings (ddtree 1.1.12) that ddtree ``version``'s worker no longer refuses."""
    v1 = keyword_parameters(
        patchset_file(DDTREE / "1.1.12", V1_UTILS), "find_ddtree_restriction_errors"
    )
    assert v1 == set(V1_TO_V2), "1.x's refusals changed: extend V1_TO_V2"
    root = DDTREE / version
    offered = keyword_parameters(patchset_file(root, CHECKS), "find_ddtree_v2_errors")
    passed = passed_keywords(patchset_file(root, WORKER), "find_ddtree_v2_errors")
    return {old for old, new in V1_TO_V2.items() if new not in offered or new not in passed}


def test_every_refusal_of_1x_is_still_made_by_the_213_worker():
    assert lost_refusals("2.1.3") == set()


def test_control_212_lost_the_hybrid_refusal():
    """The same check on 2.1.2 names what went missing: it would have failed there."""
    assert lost_refusals("2.1.2") == {"hybrid_mamba"}


@pytest.fixture(scope="module")
def checks() -> ModuleType:
    return load_module("ddtree_checks_213", patchset_file(DDTREE / "2.1.3", CHECKS))


def good(**changes: object) -> dict[str, object]:
    """The sandbox's CPU configuration (DDTREE runs there), with ``changes``."""
    config = dict(
        budget=8, block_size=4, tp_size=1, page_size=1, grammar_backend="none",
        attention_backend="torch_native", device="cpu", cuda_graphs=False,
        compact_draft_cache=False, uses_selector=False, uses_lilicorr=False, uses_domino=False,
        hybrid_target=None,
    )  # fmt: skip
    return {**config, **changes}


def test_a_runnable_configuration_is_not_refused(checks):
    assert checks.find_ddtree_v2_errors(**good()) == []


@pytest.mark.parametrize(
    "kind", ["GDN (Qwen3_5TextConfig)", "Mamba2 (NemotronHConfig)", "KDA (KimiLinearConfig)"]
)
def test_a_hybrid_target_is_refused_by_name(checks, kind):
    errors = checks.find_ddtree_v2_errors(**good(hybrid_target=kind))
    assert len(errors) == 1, errors
    assert kind in errors[0] and "hybrid" in errors[0] and "wrong tokens" in errors[0]


def test_213_changes_only_the_checks_and_the_worker_of_212():
    old, new = (load_patchset(DDTREE / v).require_lock().files for v in ("2.1.2", "2.1.3"))
    changed = {p for p in new if new[p].result_sha256 != old[p].result_sha256}
    assert changed == {CHECKS, WORKER}


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(tmp_path: Path):
    root = DDTREE / "2.1.3"
    check_sources(load_patchset(root))
    assert assert_diffs_apply_at_zero_fuzz(root, extract_sglang(root, tmp_path))
