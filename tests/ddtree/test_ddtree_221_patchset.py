"""ddtree 2.2.1: 2.2.0 plus tensor parallelism on attention-only targets.

The worker builds each request's tree with ``ddtree_tp.build_ddtree_tree_sharded`` when the
draft's LM head is vocab-parallel (every rank gathers the shards' top-k over the head's TP
group: tests/ddtree/test_ddtree_tp.py proves the trees equal the one-rank tree), so the
start-up checks now serve ``--tp-size > 1`` on an attention-only target and keep refusing what
is not proved: a hybrid target at tp > 1, DP attention, a DP LM head. A real tp-2 server:
tests/serving_v2/test_tp2_server.py (make test-serving).
"""

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
TP_BUILDER = "sglang/srt/speculative/ddtree_tp.py"


@pytest.fixture(scope="module")
def checks() -> ModuleType:
    return load_module("ddtree_checks_221", patchset_file(DDTREE / "2.2.1", CHECKS))


def good(**changes: object) -> dict[str, object]:
    """A plain (attention-only) target on the sandbox's CPU configuration, at tp 2."""
    config = dict(
        budget=8, block_size=4, tp_size=2, dp_attention=False, dp_lm_head=False, page_size=1,
        grammar_backend="none", attention_backend="torch_native", device="cpu",
        cuda_graphs=False, compact_draft_cache=False, uses_selector=False, uses_lilicorr=False,
        uses_domino=False, hybrid_target=None, radix_cache=True, replayssm=False,
    )  # fmt: skip
    return {**config, **changes}


def test_every_refusal_of_1x_is_still_offered_to_the_221_worker():
    assert lost_refusals("2.2.1") == set()


@pytest.mark.parametrize("tp_size", [1, 2, 4, 8])
def test_an_attention_only_target_is_served_at_every_tp_size(checks, tp_size):
    assert checks.find_ddtree_v2_errors(**good(tp_size=tp_size)) == []


def test_a_gdn_target_is_served_at_tp_1(checks):
    assert (
        checks.find_ddtree_v2_errors(**good(tp_size=1, hybrid_target=GDN, radix_cache=False)) == []
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hybrid_target": GDN, "radix_cache": False}, "--tp-size 2 with a hybrid target"),
        ({"dp_attention": True}, "DP attention"),
        ({"dp_lm_head": True}, "--enable-dp-lm-head"),
    ],
)
def test_what_is_not_proved_at_tp_2_is_refused_by_name(checks, change, named):
    errors = checks.find_ddtree_v2_errors(**good(**change))
    assert len(errors) == 1 and named in errors[0], errors


def test_control_220_refuses_tp_2_on_the_same_target():
    """The change 2.2.1 makes: 2.2.0's checks refuse the configuration 2.2.1 serves."""
    old = load_module("ddtree_checks_220_ctl", patchset_file(DDTREE / "2.2.0", CHECKS))
    config = {k: v for k, v in good().items() if k not in ("dp_attention", "dp_lm_head")}
    assert any("--tp-size 2" in e for e in old.find_ddtree_v2_errors(**config))


def test_221_changes_the_checks_and_the_worker_and_adds_the_sharded_builder():
    old, new = (load_patchset(DDTREE / v).require_lock().files for v in ("2.2.0", "2.2.1"))
    changed = {p for p in new if p not in old or new[p].result_sha256 != old[p].result_sha256}
    assert changed == {CHECKS, WORKER, TP_BUILDER}
    assert set(old) <= set(new)


def test_the_worker_builds_sharded_trees_only_under_a_vocab_parallel_head():
    """At tp 1 the worker keeps 2.2.0's single-rank builder (the hybrid proof still holds);
    under TP it calls the sharded builder with the head's own group."""
    source = patchset_file(DDTREE / "2.2.1", WORKER).read_text()
    assert "int(lm_head.tp_size) > 1" in source
    assert "build_ddtree_tree_sharded(" in source and "tp_group.device_group" in source
    assert "build_ddtree_tree_from_logits(logits.float(), self.ddtree_budget)" in source


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(tmp_path: Path):
    root = DDTREE / "2.2.1"
    check_sources(load_patchset(root))
    assert assert_diffs_apply_at_zero_fuzz(root, extract_sglang(root, tmp_path))


def test_p_ddtree_gives_a_0523_host_221():
    from ddtree_deploy.stages.choice import prepare_choice

    choice = prepare_choice(DDTREE.parent, "ddtree")
    chosen = choice.for_version("0.5.23")
    assert chosen is not None and chosen.ref == "ddtree@2.2.1"
