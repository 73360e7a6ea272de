"""ddtree 2.2.0: 2.1.3 serving GDN hybrid targets. Its diffs apply to pristine sglang 0.5.23 at
zero fuzz with the lock's results, every 1.x refusal is still made (as in 2.1.3), and the
start-up checks allow a GDN target and refuse what is not proved on one: the other hybrid
families, the radix cache, ReplaySSM. Serving: tests/serving_hybrid (a real 0.5.23 server)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

from ddtree_deploy.patchset import check_sources, load_patchset
from tests.ddtree.gnu_patch import assert_diffs_apply_at_zero_fuzz, extract_sglang
from tests.ddtree.test_ddtree_213_patchset import CHECKS, DDTREE, WORKER, lost_refusals
from tests.support import load_module, patchset_file

GDN = "GDN (Qwen3_5TextConfig)"
BACKEND = "sglang/srt/layers/attention/hybrid_linear_attn_backend.py"
DFLASH_WORKER = "sglang/srt/speculative/dflash_worker_v2.py"


@pytest.fixture(scope="module")
def checks() -> ModuleType:
    return load_module("ddtree_checks_220", patchset_file(DDTREE / "2.2.0", CHECKS))


def good(**changes: object) -> dict[str, object]:
    """The sandbox's CPU configuration on the hybrid host (DDTREE runs there)."""
    config = dict(
        budget=8, block_size=4, tp_size=1, page_size=1, grammar_backend="none",
        attention_backend="torch_native", device="cpu", cuda_graphs=False,
        compact_draft_cache=False, uses_selector=False, uses_lilicorr=False, uses_domino=False,
        hybrid_target=GDN, radix_cache=False, replayssm=False,
    )  # fmt: skip
    return {**config, **changes}


def test_every_refusal_of_1x_is_still_made_by_the_220_worker():
    assert lost_refusals("2.2.0") == set()


def test_a_gdn_target_and_a_plain_target_are_served(checks):
    assert checks.find_ddtree_v2_errors(**good()) == []
    plain = good(hybrid_target=None, radix_cache=True, replayssm=True)
    assert checks.find_ddtree_v2_errors(**plain) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hybrid_target": "Mamba2 (NemotronHConfig)"}, "Mamba2 (NemotronHConfig)"),
        ({"hybrid_target": "KDA (KimiLinearConfig)"}, "KDA (KimiLinearConfig)"),
        ({"hybrid_target": "Lightning (BailingHybridConfig)"}, "Lightning"),
        ({"radix_cache": True}, "--disable-radix-cache"),
        ({"replayssm": True}, "--enable-linear-replayssm-spec"),
        ({"tp_size": 2}, "--tp-size 2"),
    ],
)
def test_what_is_not_proved_on_a_hybrid_target_is_refused_by_name(checks, change, named):
    errors = checks.find_ddtree_v2_errors(**good(**change))
    assert len(errors) == 1 and named in errors[0], errors


def test_220_changes_the_worker_hooks_and_the_hybrid_backend_only():
    """Against 2.1.3: the checks, the worker, the DFlash worker's diff (two hooks, DFLASH's
    behaviour as their default) and the new hybrid backend diff."""
    old, new = (load_patchset(DDTREE / v).require_lock().files for v in ("2.1.3", "2.2.0"))
    changed = {p for p in new if p not in old or new[p].result_sha256 != old[p].result_sha256}
    assert changed == {CHECKS, WORKER, DFLASH_WORKER, BACKEND}


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(tmp_path: Path):
    root = DDTREE / "2.2.0"
    check_sources(load_patchset(root))
    assert assert_diffs_apply_at_zero_fuzz(root, extract_sglang(root, tmp_path))
