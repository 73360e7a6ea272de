"""Shared files: the migrated ddtree versions, immutability of released locks, the resolver,
and the push path's bytes. Local only; one test reads the wheels of 0.5.13.post1 and 0.5.23."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import (
    blob_path,
    check_sources,
    copy_version,
    load_patchset,
    plan_dedupe,
    read_source,
    source_file,
    store_dir,
    verify_patchset,
    write_lock,
)
from ddtree_deploy.stages.prepared import prepare_patchset
from tests.support import REPO, UTILS, patchset_file

DDTREE = REPO / "patchsets" / "ddtree"
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
UTILS_SHA = "c37bd7fd676e36e2eb117682a329d3583ee28e132792e00e701b63cd4e5cd83e"
SPEC_INFO_SHA = "08d4b63afac3286307dacae29580e0a8a080b14f88ee99ee397184add81ba9b3"
# ddtree_utils.py with the faster builder, shared by 1.1.9, 1.1.10, 2.0.1 and 2.1.0 (released
# after the migration: their locks name this blob), and with the one-read builder, shared by
# 1.1.11 and 2.1.1, and with the heap reading only what it pops, shared by 1.1.12 and 2.1.2.
FAST_UTILS_SHA = "bb704d9b9baca2e746cac375baf20a2a90ff43e1f9eba9b8021eb80ebd2b7db7"
ONE_READ_UTILS_SHA = "c455911741518f850e083eb66fa74dff83e1ef86cbbfd34601b90e0e7480f9c8"
POPPED_UTILS_SHA = "86c9d1dbc534218a221db5aa9032fc63e26104668609394ba3085e4333c731e9"
# sha256 of each patchset.lock.json as it was before the migration into the store (commit
# abe08d4): the migration moved sources, never a lock. Since then the locks also record
# patchset.toml (lock_version 2, one commit that added only that record): `lock_sha256`
# takes the record out again, so these pins still prove every other byte unchanged.
LOCK_SHA256 = {
    "1.0.0": "20d8aa539cd61c020fb102cedb445d86cc817f92c137040aaabc16c65e428dcb",
    "1.1.0": "5f63c8bd1742ed04d7f96394dc5fa35e03d9915408899ea1ac0fb2c06fcd94b2",
    "2.0.0": "f638779661924ff3d17b7cb3e25943f446343457c8397a9488f8932451f9d95e",
}


def lock_sha256(root: Path) -> str:
    """sha256 of root's lock as written before locks recorded patchset.toml (see above)."""
    lock = json.loads((root / "patchset.lock.json").read_text(encoding="utf-8"))
    assert lock.pop("lock_version") == 2 and set(lock.pop("spec")) >= {"name", "target"}
    lock.pop("spec_sha256")
    if lock["references"] == {}:  # a default the old writer left out
        del lock["references"]
    legacy = json.dumps({**lock, "lock_version": 1}, indent=2, sort_keys=True) + "\n"
    return hashlib.sha256(legacy.encode()).hexdigest()


def copy_tree(tmp_path: Path) -> Path:
    """Return a copy of patchsets/ddtree (every version and the store) under tmp_path."""
    return Path(shutil.copytree(DDTREE, tmp_path / "patchsets" / "ddtree"))


def test_migration_kept_every_lock_byte_identical() -> None:
    for version, sha in LOCK_SHA256.items():
        assert lock_sha256(DDTREE / version) == sha, version
        check_sources(load_patchset(DDTREE / version))  # every source still hashes to the lock
    assert {UTILS_SHA, SPEC_INFO_SHA, FAST_UTILS_SHA} <= {
        p.name for p in store_dir(DDTREE / "1.0.0").iterdir()
    }
    for version in LOCK_SHA256:  # the copies are gone from the version folders
        assert not (DDTREE / version / "files/sglang/srt/speculative/ddtree_utils.py").exists()
    assert not (DDTREE / "1.0.0" / "patches" / "spec_info.py.diff").exists()


def test_each_shared_file_is_kept_once() -> None:
    """No two versions hold the same source bytes in their own folders (dedupe finds nothing),
    and every version's ddtree_utils.py resolves to its builder's one blob."""
    versions = [
        load_patchset(DDTREE / v)
        for v in (*LOCK_SHA256, "1.1.9", "1.1.10", "1.1.11", "1.1.12")
        + ("2.0.1", "2.1.0", "2.1.1", "2.1.2")
    ]
    assert plan_dedupe(versions).moves == ()
    assert {patchset_file(DDTREE / v) for v in LOCK_SHA256} == {
        blob_path(DDTREE / "1.0.0", UTILS_SHA)
    }
    assert patchset_file(DDTREE / "1.0.0", SPEC_INFO) == patchset_file(DDTREE / "1.1.0", SPEC_INFO)
    assert {patchset_file(DDTREE / v) for v in ("1.1.9", "1.1.10", "2.0.1", "2.1.0")} == {
        blob_path(DDTREE / "1.0.0", FAST_UTILS_SHA)
    }
    assert {patchset_file(DDTREE / v) for v in ("1.1.11", "2.1.1")} == {
        blob_path(DDTREE / "1.0.0", ONE_READ_UTILS_SHA)
    }
    assert {patchset_file(DDTREE / v) for v in ("1.1.12", "2.1.2")} == {
        blob_path(DDTREE / "1.0.0", POPPED_UTILS_SHA)
    }


def test_newer_version_changing_a_shared_file_cannot_change_released_locks(
    tmp_path: Path,
) -> None:
    """2.9.0 changes the shared ddtree_utils.py: it gets a new blob; 1.0.0, 1.1.0 and 2.0.0
    keep their locks byte for byte and still verify against their wheels."""
    ddtree = copy_tree(tmp_path)
    new = copy_version(load_patchset(ddtree / "2.0.0"), ddtree / "2.9.0", lock=False)
    spec = new / "patchset.toml"
    spec.write_text(spec.read_text().replace('version = "2.0.0"', 'version = "2.9.0"', 1))
    edited = blob_path(ddtree / "2.0.0", UTILS_SHA).read_bytes() + b"\n# changed for 2.9.0\n"
    local = new / "files/sglang/srt/speculative/ddtree_utils.py"
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(edited)  # authoring: edit in place; the local copy wins
    lock = write_lock(load_patchset(new))
    new_sha = hashlib.sha256(edited).hexdigest()
    assert lock.files[UTILS].source_sha256 == new_sha != UTILS_SHA
    assert not local.exists()  # lock moved it into the store ...
    assert blob_path(new, new_sha).read_bytes() == edited  # ... as a new blob
    assert blob_path(new, UTILS_SHA).read_bytes() == patchset_file(DDTREE / "1.0.0").read_bytes()
    for version, sha in LOCK_SHA256.items():
        assert lock_sha256(ddtree / version) == sha, version
        check_sources(load_patchset(ddtree / version))
    verify_patchset(load_patchset(ddtree / "1.0.0"))  # rebuilt from the wheel, same hashes
    assert patchset_file(new).read_bytes() == edited  # the new version resolves its own blob


def test_relocking_a_released_shared_version_rewrites_the_same_bytes(tmp_path: Path) -> None:
    """The lock does not say where the bytes live: relocking 1.1.0 from the store, or from a
    self-contained copy whose files are its own, writes the released lock byte for byte."""
    ddtree = copy_tree(tmp_path)
    own = copy_version(
        load_patchset(DDTREE / "1.1.0"), tmp_path / "own" / "ddtree" / "1.1.0", own_files=True
    )
    for root in (ddtree / "1.1.0", own):
        write_lock(load_patchset(root), replace=True)  # as `patchset lock --force` would
        assert lock_sha256(root) == LOCK_SHA256["1.1.0"], root
        released = (DDTREE / "1.1.0" / "patchset.lock.json").read_bytes()
        assert (root / "patchset.lock.json").read_bytes() == released, root
    assert not (ddtree / "1.1.0" / "patches" / "spec_info.py.diff").exists()  # not copied back
    assert (own / "patches" / "spec_info.py.diff").is_file()  # unshared: stays in place


def test_a_local_copy_of_a_shared_file_wins_and_is_checked_against_the_lock(
    tmp_path: Path,
) -> None:
    """Editing a shared file in place: check_sources names the local copy once it differs
    from the lock (negative control: an unchanged local copy passes)."""
    ddtree = copy_tree(tmp_path)
    local = ddtree / "1.1.0" / "patches" / "spec_info.py.diff"
    local.parent.mkdir(exist_ok=True)
    shutil.copyfile(blob_path(ddtree / "1.1.0", SPEC_INFO_SHA), local)
    patchset = load_patchset(ddtree / "1.1.0")
    check_sources(patchset)  # same bytes as the lock names: fine
    entry = next(e for e in patchset.spec.files if e.path == SPEC_INFO)
    assert entry.shared and source_file(patchset, entry) == local
    assert read_source(patchset, entry) == local.read_bytes()
    local.write_bytes(local.read_bytes() + b"+# an edit\n")
    with pytest.raises(PatchsetError, match="spec_info.py.diff: changed since the lock"):
        check_sources(load_patchset(ddtree / "1.1.0"))


def test_push_ships_the_shared_bytes_of_the_real_110() -> None:
    """What a push sends to the host for each shared entry is the blob's bytes."""
    prepared = prepare_patchset(load_patchset(DDTREE / "1.1.0"))
    shipped = {f.path: f.source for f in prepared.files}
    assert shipped[UTILS] == blob_path(DDTREE / "1.1.0", UTILS_SHA).read_bytes()
    assert shipped[SPEC_INFO] == blob_path(DDTREE / "1.1.0", SPEC_INFO_SHA).read_bytes()
    assert hashlib.sha256(shipped[UTILS]).hexdigest() == UTILS_SHA
