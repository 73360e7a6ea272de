"""`patchset dedupe NAME`: from the pre-migration layout (every version holding its own copy)
it rebuilds the checked-in migrated tree byte for byte, and never touches a lock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import copy_version, load_patchset, source_file
from ddtree_deploy.patchset.dedupe import flag_shared
from tests.support import REPO

DDTREE = REPO / "patchsets" / "ddtree"
VERSIONS = (  # every locked version
    *("1.0.0", "1.1.0", "1.1.9", "1.1.10", "1.1.11", "1.1.12"),
    *("2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2"),
)


def shared_entries(root: Path, versions: tuple[str, ...] = VERSIONS) -> int:
    """How many (version, file) entries of the checked-in tree are read from the store."""
    return sum(entry.shared for v in versions for entry in load_patchset(root / v).spec.files)


def migrated(root: Path) -> dict[str, bytes]:
    """`snapshot` of the checked-in tree as dedupe leaves it: VERSIONS and the blobs they
    use."""
    used = {
        str(blob.relative_to(root))
        for version in VERSIONS
        for blob in {
            source_file(load_patchset(root / version), entry)
            for entry in load_patchset(root / version).spec.files
            if entry.shared
        }
    }
    return {
        path: data
        for path, data in snapshot(root).items()
        if path.split("/")[0] in VERSIONS or path in used
    }


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def unshared_tree(tmp_path: Path) -> Path:
    """Return tmp_path/patchsets/ddtree as it was before the migration: no store, every
    version with its own files (and its own lock)."""
    ddtree = tmp_path / "patchsets" / "ddtree"
    for version in VERSIONS:
        copy_version(load_patchset(DDTREE / version), ddtree / version, own_files=True)
    return ddtree


def dedupe(ddtree: Path, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(
        app,
        ["patchset", "dedupe", "ddtree", *args, "--patchsets-dir", str(ddtree.parent)],
        env={"COLUMNS": "400"},
    )
    return done.exit_code, " ".join(done.output.split())


def test_dedupe_rebuilds_the_migrated_tree_and_keeps_every_lock(tmp_path: Path) -> None:
    ddtree = unshared_tree(tmp_path)
    assert not (ddtree / "shared").exists()
    assert "shared" not in (ddtree / "1.0.0" / "patchset.toml").read_text()
    before = snapshot(ddtree)
    code, output = dedupe(ddtree, "--dry-run")
    assert (code, snapshot(ddtree)) == (0, before), output  # a dry run writes nothing
    moved = shared_entries(DDTREE)
    assert f"would move {moved} files" in output
    code, output = dedupe(ddtree)
    assert code == 0 and f"moved {moved} files" in output and "no lock changed" in output, output
    assert snapshot(ddtree) == migrated(DDTREE)  # the checked-in migration, byte for byte
    assert dedupe(ddtree)[1].endswith(
        "moved 0 files into " + str(ddtree / "shared") + "; no lock changed"
    )


def test_a_file_the_store_already_holds_is_shared_alone(tmp_path: Path) -> None:
    """One version that (again) holds its own copy of a stored file: dedupe shares it too."""
    ddtree = unshared_tree(tmp_path)
    assert dedupe(ddtree)[0] == 0
    own = copy_version(load_patchset(DDTREE / "2.0.0"), tmp_path / "own", own_files=True)
    shutil.rmtree(ddtree / "2.0.0")
    shutil.copytree(own, ddtree / "2.0.0")
    code, output = dedupe(ddtree)
    assert code == 0 and f"moved {shared_entries(DDTREE, ('2.0.0',))} files" in output, output
    assert snapshot(ddtree) == migrated(DDTREE)


def test_unlocked_versions_are_left_alone(tmp_path: Path) -> None:
    ddtree = unshared_tree(tmp_path)
    (ddtree / "2.0.0" / "patchset.lock.json").unlink()
    code, output = dedupe(ddtree)
    assert code == 0 and "skipped ddtree@2.0.0: no lock" in output and "moved " in output
    assert (ddtree / "2.0.0" / "files/sglang/srt/speculative/ddtree_utils.py").is_file()


def test_a_source_changed_since_its_lock_stops_dedupe_before_anything_is_written(
    tmp_path: Path,
) -> None:
    ddtree = unshared_tree(tmp_path)
    diff = ddtree / "1.1.0" / "patches" / "spec_info.py.diff"
    diff.write_bytes(diff.read_bytes() + b"+# edited after the lock\n")
    before = snapshot(ddtree)
    code, output = dedupe(ddtree)
    assert code == 2 and "spec_info.py.diff: changed since the lock" in output, output
    assert snapshot(ddtree) == before
    assert dedupe(tmp_path / "patchsets" / "none")[0] == 2  # no such name: exit 2 too


def test_flag_shared_refuses_a_layout_it_cannot_edit_by_line(tmp_path: Path) -> None:
    spec = tmp_path / "ddtree" / "1.0.0" / "patchset.toml"
    text = (
        'name = "ddtree"\nversion = "1.0.0"\n'
        'file = [{ path = "sglang/a.py", new = "files/sglang/a.py" }]\n'
        '[target]\npackage = "sglang"\nversion = "0.5.13"\n'
    )
    with pytest.raises(PatchsetError, match="add it by hand"):
        flag_shared(text, {"sglang/a.py"}, spec)
    block = (
        text.replace('file = [{ path = "sglang/a.py", new = "files/sglang/a.py" }]\n', "")
        + '[[file]]\npath = "sglang/a.py"\nnew = "files/sglang/a.py"\n'
    )
    assert flag_shared(block, {"sglang/a.py"}, spec).endswith(
        'new = "files/sglang/a.py"\nshared = true\n'
    )
