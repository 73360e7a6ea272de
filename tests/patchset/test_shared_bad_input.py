"""Shared files, bad input: a missing blob, a tampered blob, a shared entry with neither a lock
nor a local copy, a lock naming no sha256 -> exit 2 naming the file (and hash), nothing written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from tests.support import REPO

DDTREE = REPO / "patchsets" / "ddtree"
UTILS_SHA = "c37bd7fd676e36e2eb117682a329d3583ee28e132792e00e701b63cd4e5cd83e"


def blob(ddtree: Path) -> Path:
    return ddtree / "shared" / "sha256" / UTILS_SHA


def forge_hash(ddtree: Path) -> None:
    path = ddtree / "1.1.0" / "patchset.lock.json"
    lock = json.loads(path.read_text())
    lock["files"]["sglang/srt/speculative/ddtree_utils.py"]["source_sha256"] = "../../../x"
    path.write_text(json.dumps(lock))


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def patchset_cli(ddtree: Path, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(
        app, ["patchset", *args, "--patchsets-dir", str(ddtree.parent)], env={"COLUMNS": "400"}
    )
    return done.exit_code, " ".join(done.output.split())  # the message may wrap


CASES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "missing_blob": (
        lambda d: blob(d).unlink(),
        ("ddtree_utils.py", UTILS_SHA, "is missing from the store"),
    ),
    "tampered_blob": (
        lambda d: blob(d).write_bytes(blob(d).read_bytes() + b"\n# edited in the store\n"),
        (UTILS_SHA, "tampered store"),
    ),
    "shared_without_lock_or_copy": (
        lambda d: (d / "1.1.0" / "patchset.lock.json").unlink(),
        ("ddtree_utils.py", "no local copy and no lock entry"),
    ),
    "lock_names_no_sha256": (forge_hash, ("'../../../x' is not a sha256",)),
}


@pytest.mark.parametrize("command", ["lock --force", "verify"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_shared_source_exits_2_naming_it(tmp_path: Path, case: str, command: str) -> None:
    ddtree = Path(shutil.copytree(DDTREE, tmp_path / "patchsets" / "ddtree"))
    breaks, expected = CASES[case]
    breaks(ddtree)
    before = snapshot(ddtree)
    code, output = patchset_cli(ddtree, *command.split(), "ddtree@1.1.0")
    assert code == 2, output
    assert "error:" in output
    if not (case == "shared_without_lock_or_copy" and command == "verify"):
        assert all(text in output for text in expected), output
    else:  # verify wants a lock before it reads any source
        assert "lock.json: missing" in output
    assert snapshot(ddtree) == before  # nothing written


@pytest.mark.parametrize("command", ["lock --force", "verify"])
def test_intact_store_passes(tmp_path: Path, command: str) -> None:
    """Negative control of the cases above: the untouched copy locks and verifies."""
    ddtree = Path(shutil.copytree(DDTREE, tmp_path / "patchsets" / "ddtree"))
    code, output = patchset_cli(ddtree, *command.split(), "ddtree@1.1.0")
    assert code == 0, output
    assert (ddtree / "1.1.0" / "patchset.lock.json").read_bytes() == (
        DDTREE / "1.1.0" / "patchset.lock.json"
    ).read_bytes()
