"""ddtree 1.1.0 keeps 1.0.0's payload, adds the worker files, and its diffs are well formed.

That the diffs apply to pristine sglang with zero fuzz is proven by `patchset lock`, and
re-checked here with GNU patch on the pinned wheel's own files (fetched once into the cache).
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import digest, fetch_wheel
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


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """sglang/ of the pinned 0.5.13.post1 wheel, extracted: the files the diffs are against.
    (This test once read them from a path only a developer's machine had, and skipped
    everywhere else, CI included.)"""
    wheel = fetch_wheel(load_patchset(V110).spec.target)
    root = tmp_path_factory.mktemp("sglang-pinned")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root, [n for n in archive.namelist() if n.startswith("sglang/")])
    return root


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_110_diffs_apply_to_pristine_with_zero_fuzz_and_match_the_lock(pristine: Path) -> None:
    patchset = load_patchset(V110)
    assert patchset.spec.target.version == "0.5.13.post1"
    lock = patchset.require_lock()
    patched = [entry for entry in patchset.spec.files if entry.kind != "new"]
    assert patched, "1.1.0 patches sglang's own files"
    for entry in patched:
        target = pristine / entry.path
        assert digest(target.read_bytes()) == lock.files[entry.path].base_sha256, entry.path
        done = subprocess.run(
            ["patch", "-p1", "-F0", "--no-backup-if-mismatch", "-d", str(pristine),
             "-i", str(patchset_file(V110, entry.path))],
            capture_output=True,
            text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
        assert digest(target.read_bytes()) == lock.files[entry.path].result_sha256, entry.path
