"""ddtree 2.0.0: its diffs apply to pristine sglang 0.5.23 with GNU patch at zero fuzz and
offset, the result is what the lock says, and the tree utils are 1.0.0's byte for byte."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from ddtree_deploy.patchset import check_sources, load_patchset, verify_patchset
from tests.ddtree.gnu_patch import assert_diffs_apply_at_zero_fuzz, extract_sglang
from tests.support import REPO, patchset_file

DDTREE_200 = REPO / "patchsets" / "ddtree" / "2.0.0"


def test_spec_targets_0523_with_the_smoke_suites_of_100():
    spec = tomllib.loads((DDTREE_200 / "patchset.toml").read_text())
    spec_100 = tomllib.loads(
        (REPO / "patchsets" / "ddtree" / "1.0.0" / "patchset.toml").read_text()
    )
    assert spec["target"] == {"package": "sglang", "version": "0.5.23"}
    assert spec["smoke"] == spec_100["smoke"]
    ddtree_100 = REPO / "patchsets" / "ddtree" / "1.0.0"
    assert patchset_file(DDTREE_200).read_bytes() == patchset_file(ddtree_100).read_bytes()
    check_sources(load_patchset(DDTREE_200))


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(tmp_path: Path):
    assert assert_diffs_apply_at_zero_fuzz(DDTREE_200, extract_sglang(DDTREE_200, tmp_path))


def test_verify_rebuilds_the_lock_from_the_wheel():
    lock = verify_patchset(load_patchset(DDTREE_200))
    assert lock.wheel.startswith("sglang-0.5.23-") and len(lock.files) == 6
