"""A patchset's diffs applied by GNU patch to its pinned wheel's own files.

`patchset lock` proves the diffs apply with our own applier; this re-checks them with the
tool a reader of the diffs would use, at zero fuzz and offset, and holds each file before
and after to the lock's hashes.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import digest, fetch_wheel
from tests.support import patchset_file


def extract_sglang(patchset_dir: Path, root: Path) -> Path:
    """Write sglang/ of the patchset's target wheel (fetched once into the cache) under root."""
    wheel = fetch_wheel(load_patchset(patchset_dir).spec.target)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root, [n for n in archive.namelist() if n.startswith("sglang/")])
    return root


def assert_diffs_apply_at_zero_fuzz(patchset_dir: Path, pristine: Path) -> int:
    """Apply every diff of the patchset to `pristine` (extract_sglang's root) with GNU patch;
    assert its new files are new, and each patched file's hash before and after is the lock's.
    Return how many diffs applied."""
    patchset = load_patchset(patchset_dir)
    lock = patchset.require_lock()
    target_version = patchset.spec.target.version
    applied = 0
    for entry in patchset.spec.files:
        target = pristine / entry.path
        if entry.kind == "new":
            assert not target.exists(), f"{entry.path} already exists in sglang {target_version}"
            continue
        diff = patchset_file(patchset_dir, entry.path).read_text()
        assert diff.splitlines()[:2] == [f"--- a/{entry.path}", f"+++ b/{entry.path}"]
        assert digest(target.read_bytes()) == lock.files[entry.path].base_sha256, entry.path
        done = subprocess.run(
            ["patch", "-p1", "-F0", "--no-backup-if-mismatch", "-d", str(pristine)],
            input=diff, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
        assert digest(target.read_bytes()) == lock.files[entry.path].result_sha256, entry.path
        applied += 1
    return applied
