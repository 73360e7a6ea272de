"""ddtree 2.1.0: its diffs apply to pristine sglang 0.5.23 at zero fuzz and offset with the
lock's results, and the start-up refusals fire on what DDTreeWorkerV2 cannot run (and stay
silent on what it can). Serving is proven on real servers in tests/serving_v2."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

from ddtree_deploy.patchset import check_sources, load_patchset
from tests.ddtree.gnu_patch import assert_diffs_apply_at_zero_fuzz, extract_sglang
from tests.support import REPO, load_module, patchset_file

DDTREE_210 = REPO / "patchsets" / "ddtree" / "2.1.0"
CHECKS = "sglang/srt/speculative/ddtree_checks.py"


@pytest.fixture(scope="module")
def checks() -> ModuleType:
    """ddtree_checks.py of 2.1.0, loaded on its own (it imports nothing from sglang); a
    shared blob (its name has no .py suffix), so through load_module's explicit loader."""
    return load_module("ddtree_checks_210", patchset_file(DDTREE_210, CHECKS))


def good(**changes: object) -> dict[str, object]:
    """The sandbox's CPU configuration (DDTREE runs there), with ``changes``."""
    config = dict(
        budget=8, block_size=4, tp_size=1, page_size=1, grammar_backend="none",
        attention_backend="torch_native", device="cpu", cuda_graphs=False,
        compact_draft_cache=False, uses_selector=False, uses_lilicorr=False, uses_domino=False,
    )  # fmt: skip
    return {**config, **changes}


def test_a_runnable_configuration_is_not_refused(checks):
    assert checks.find_ddtree_v2_errors(**good()) == []
    gpu = good(device="cuda", attention_backend="triton", budget=63, block_size=16)
    assert checks.find_ddtree_v2_errors(**gpu) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"budget": 0}, "--speculative-ddtree-budget 0"),
        ({"compact_draft_cache": True}, "--speculative-draft-window-size"),
        ({"tp_size": 2}, "--tp-size 2"),
        ({"page_size": 16}, "--page-size 16"),
        ({"grammar_backend": "xgrammar"}, "--grammar-backend xgrammar"),
        ({"attention_backend": "fa3"}, "--attention-backend fa3"),
        ({"device": "cuda", "attention_backend": "triton", "cuda_graphs": True}, "CUDA graphs"),
        ({"uses_selector": True}, "candidate selector"),
        ({"uses_domino": True}, "Domino"),
    ],
)
def test_each_unsupported_setting_is_refused_by_name(checks, change, named):
    errors = checks.find_ddtree_v2_errors(**good(**change))
    assert len(errors) == 1 and named in errors[0], errors


def test_a_window_no_wider_than_the_block_keeps_a_draft_window(checks):
    assert checks.find_ddtree_v2_errors(**good(budget=3, compact_draft_cache=True)) == []


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(tmp_path: Path):
    check_sources(load_patchset(DDTREE_210))
    assert assert_diffs_apply_at_zero_fuzz(DDTREE_210, extract_sglang(DDTREE_210, tmp_path))
