"""ddtree 2.0.0: its diffs apply to pristine sglang 0.5.23 with GNU patch at zero fuzz and
offset, the result is what the lock says, and the tree utils are 1.0.0's byte for byte."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from ddtree_deploy.patchset import check_sources, load_patchset, verify_patchset
from ddtree_deploy.patchset.materialize import digest, fetch_wheel
from tests.support import REPO, patchset_file

DDTREE_200 = REPO / "patchsets" / "ddtree" / "2.0.0"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """sglang/ of the 0.5.23 wheel, extracted (the wheel is fetched once into the cache)."""
    wheel = fetch_wheel(load_patchset(DDTREE_200).spec.target)
    root = tmp_path_factory.mktemp("sglang-0.5.23")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root, [n for n in archive.namelist() if n.startswith("sglang/")])
    return root


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
def test_diffs_apply_with_zero_fuzz_and_offset_and_match_the_lock(pristine):
    patchset = load_patchset(DDTREE_200)
    lock = patchset.require_lock()
    for entry in patchset.spec.files:
        target = pristine / entry.path
        if entry.kind == "new":
            assert not target.exists(), f"{entry.path} already exists in sglang 0.5.23"
            continue
        diff = patchset_file(DDTREE_200, entry.path).read_text()
        assert diff.splitlines()[:2] == [f"--- a/{entry.path}", f"+++ b/{entry.path}"]
        assert digest(target.read_bytes()) == lock.files[entry.path].base_sha256
        done = subprocess.run(
            ["patch", "-p1", "-F0", "--no-backup-if-mismatch", "-d", str(pristine)],
            input=diff,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
        assert digest(target.read_bytes()) == lock.files[entry.path].result_sha256


def test_verify_rebuilds_the_lock_from_the_wheel():
    lock = verify_patchset(load_patchset(DDTREE_200))
    assert lock.wheel.startswith("sglang-0.5.23-") and len(lock.files) == 6
