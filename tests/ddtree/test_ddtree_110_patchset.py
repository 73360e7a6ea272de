"""ddtree 1.1.0 keeps 1.0.0's payload, adds the worker files, and its diffs are well formed.

That the diffs apply to pristine sglang with zero fuzz is proven by `patchset lock`, and
re-checked here with GNU patch on the pinned wheel's own files (fetched once into the cache).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from tests.ddtree.gnu_patch import assert_diffs_apply_at_zero_fuzz, extract_sglang
from tests.ddtree.test_ddtree_patches import HUNK_HEADER
from tests.support import patchset_file

ROOT = Path(__file__).resolve().parents[2] / "patchsets" / "ddtree"
V100, V110 = ROOT / "1.0.0", ROOT / "1.1.0"
NEW_FILES = {"ddtree_worker_utils.py", "ddtree_info.py"}


def manifest(directory: Path) -> dict:
    return tomllib.loads((directory / "patchset.toml").read_text())


def test_110_extends_100_and_keeps_its_smoke() -> None:
    old, new = manifest(V100), manifest(V110)
    assert (new["name"], new["version"]) == ("ddtree", "1.1.0")
    assert new["target"] == old["target"] == {"package": "sglang", "version": "0.5.13.post1"}
    assert new["smoke"] == old["smoke"]
    old_paths = {e["path"] for e in old["file"]}
    new_paths = {e["path"] for e in new["file"]}
    assert old_paths < new_paths
    added = {Path(p).name for p in new_paths - old_paths}
    assert added == NEW_FILES | {"dflash_worker.py"}
    for path in ("sglang/srt/speculative/ddtree_utils.py", "sglang/srt/speculative/spec_info.py"):
        assert patchset_file(V110, path) == patchset_file(V100, path), path  # one shared blob
    assert (V110 / "patchset.lock.json").is_file()


@pytest.mark.parametrize("entry", [e for e in manifest(V110)["file"] if "patch" in e], ids=str)
def test_110_diff_is_one_file_with_exact_counts(entry: dict) -> None:
    lines = patchset_file(V110, entry["path"]).read_text().splitlines()
    assert lines[:2] == [f"--- a/{entry['path']}", f"+++ b/{entry['path']}"]
    assert sum(line.startswith("--- ") for line in lines) == 1
    i, body = 0, lines[2:]
    while i < len(body):
        match = HUNK_HEADER.match(body[i])
        assert match, body[i]
        old_left, new_left = int(match.group(2) or 1), int(match.group(4) or 1)
        i += 1
        while old_left or new_left:
            old_left -= body[i][:1] in (" ", "-")
            new_left -= body[i][:1] in (" ", "+")
            i += 1
        assert old_left == new_left == 0


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_110_diffs_apply_to_pristine_with_zero_fuzz_and_match_the_lock(tmp_path: Path) -> None:
    # on the pinned wheel's files: this test once read them from a path only a developer's
    # machine had, and skipped everywhere else, CI included
    assert load_patchset(V110).spec.target.version == "0.5.13.post1"
    pristine = extract_sglang(V110, tmp_path)
    assert assert_diffs_apply_at_zero_fuzz(V110, pristine) == 3  # spec_info, server_args, worker
