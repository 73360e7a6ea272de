"""`patchset new`: ddtree 1.0.0 captured back from an edited tree and from real diffs of it
(`diff -ruN`, `git diff --no-index`) locks to the same results as the shipped lock."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli.app import app
from ddtree_deploy.patchset import load_patchset, verify_patchset
from ddtree_deploy.patchset.capture import capture_from_tree
from ddtree_deploy.patchset.materialize import Materialized, materialize
from tests.patchset.conftest import linked_copy, write_file
from tests.support import DDTREE_100, REPO, copy_patchset

TARGET = "sglang==0.5.13.post1"
SHIPPED = json.loads((DDTREE_100 / "patchset.lock.json").read_text())


def new_patchset(patchsets: Path, *args: str, target: str = TARGET) -> tuple[int, str]:
    """Run `patchset new ARGS --target TARGET --patchsets-dir PATCHSETS` in process; return
    the exit code and what it printed."""
    argv = ["patchset", "new", *args, "--target", target, "--patchsets-dir", str(patchsets)]
    done = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    return done.exit_code, done.output


def has_row(out: str, path: str, kind: str, plus: int | None = None, minus: int = 0) -> bool:
    """Whether the file table in `out` has the row PATH | KIND [| PLUS | MINUS]."""
    counts = "" if plus is None else rf"\s*│\s*{plus} │ {minus} "
    return re.search(rf"│ {re.escape(path)}\s*│ {kind}{counts}", out) is not None


def with_ddtree(tmp_path: Path, *versions: str) -> Path:
    """A patchsets dir holding copies of the shipped ddtree versions (for --like)."""
    patchsets = tmp_path / "patchsets"
    for version in versions:
        copy_patchset(REPO / "patchsets" / "ddtree" / version, patchsets / "ddtree" / version)
    patchsets.mkdir(exist_ok=True)
    return patchsets


def results(root: Path) -> dict[str, tuple[str, str | None, str]]:
    """path -> (kind, base_sha256, result_sha256) of the lock in `root` (or a lock dict)."""
    lock = json.loads((root / "patchset.lock.json").read_text())
    return {p: (f["kind"], f["base_sha256"], f["result_sha256"]) for p, f in lock["files"].items()}


SHIPPED_RESULTS = results(DDTREE_100)


def ddtree_100_files(wheel: Path) -> dict[str, Materialized]:
    """path -> ddtree 1.0.0's file as its lock builds it from the wheel."""
    return {m.entry.path: m for m in materialize(load_patchset(DDTREE_100), wheel)}


def test_from_tree_locks_to_ddtree_100_results(ddtree_site, tmp_path):
    patchsets = with_ddtree(tmp_path, "1.0.0")
    code, out = new_patchset(patchsets, "mine@1.0.0", "--from-tree", str(ddtree_site),
                             "--like", "ddtree@1.0.0")  # fmt: skip
    assert code == 0, out
    assert "wrote patchsets/mine/1.0.0 (locked, 3 files)" in out
    assert has_row(out, "sglang/srt/server_args.py", "changed", 40, 1)
    assert not has_row(out, "sglang/srt/server_args.py", "added")  # (has_row's control)
    root = patchsets / "mine" / "1.0.0"
    assert results(root) == SHIPPED_RESULTS
    verify_patchset(load_patchset(root))  # the lock stands on its own
    spec = tomllib.loads((root / "patchset.toml").read_text())
    shipped = tomllib.loads((DDTREE_100 / "patchset.toml").read_text())
    assert spec["smoke"] == shipped["smoke"]  # --like lends its suites
    assert [p.name for p in (root / "patches").iterdir()] != []


def test_one_more_edit_changes_that_file_only(ddtree_site, tmp_path):
    """Negative control of the comparison above: the lock follows the tree, not ddtree."""
    site = linked_copy(ddtree_site, tmp_path / "site")
    spec_info = site / "sglang/srt/speculative/spec_info.py"
    write_file(spec_info, spec_info.read_bytes() + b"# one more line\n")
    code, out = new_patchset(tmp_path / "ps", "mine@1.0.0", "--from-tree", str(site))
    assert code == 0, out
    got = results(tmp_path / "ps" / "mine" / "1.0.0")
    differs = {p for p in SHIPPED_RESULTS if got[p] != SHIPPED_RESULTS[p]}
    assert differs == {"sglang/srt/speculative/spec_info.py"}


def test_the_package_itself_captures_the_same(ddtree_site, wheel):
    capture = capture_from_tree(ddtree_site / "sglang", wheel)  # DIR = the package itself
    results = {p: (m.entry.kind, m.result) for p, m in ddtree_100_files(wheel).items()}
    assert {p: ("patch", b) for p, b in capture.changed.items()} | {
        p: ("new", b) for p, b in capture.added.items()
    } == results
    assert capture.deleted == [] and capture.ignored == []  # the wheel's own .so is no news


def test_from_diff_ruN_locks_to_ddtree_100_results(pristine_site, ddtree_site, tmp_path):
    (tmp_path / "old").symlink_to(pristine_site)
    (tmp_path / "new").symlink_to(ddtree_site)
    done = subprocess.run(["diff", "-ruN", "old", "new"], cwd=tmp_path, capture_output=True)
    assert done.returncode == 1, done.stderr  # 1: the trees differ
    (tmp_path / "edit.diff").write_bytes(done.stdout)
    code, out = new_patchset(
        tmp_path / "ps", "mine@1.0.0", "--from-diff", str(tmp_path / "edit.diff")
    )
    assert code == 0, out
    root = tmp_path / "ps" / "mine" / "1.0.0"
    assert results(root) == SHIPPED_RESULTS
    spec = tomllib.loads((root / "patchset.toml").read_text())
    assert spec["smoke"] == {"suites": ["integrity", "compile", "imports"], "after_restart": []}


@pytest.fixture(scope="module")
def git_diff(pristine_site, ddtree_site, tmp_path_factory) -> str:
    """`git diff --no-index x/python/sglang y/python/sglang` (a fork's python/ layout)."""
    work = tmp_path_factory.mktemp("git")
    for side, site in (("x", pristine_site), ("y", ddtree_site)):
        (work / side).mkdir()
        (work / side / "python").symlink_to(site)
    done = subprocess.run(
        ["git", "diff", "--no-index", "x/python/sglang", "y/python/sglang"],
        cwd=work, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "--- a/x/python/sglang/srt/server_args.py" in done.stdout
    assert "new file mode" in done.stdout and "--- /dev/null" in done.stdout
    return done.stdout


def test_from_git_diff_with_strip(git_diff, tmp_path):
    diff = tmp_path / "edit.diff"
    diff.write_text(git_diff)
    code, out = new_patchset(
        tmp_path / "ps", "mine@1.0.0", "--from-diff", str(diff), "--strip", "3"
    )
    assert code == 0, out
    assert results(tmp_path / "ps" / "mine" / "1.0.0") == SHIPPED_RESULTS
    # negative control: one component short leaves python/ in front: refused, nothing written
    code, out = new_patchset(
        tmp_path / "ps2", "mine@1.0.0", "--from-diff", str(diff), "--strip", "2"
    )
    assert code == 2 and "the first reads 'python/sglang/srt/server_args.py'); set --strip N" in out
    assert not (tmp_path / "ps2" / "mine").exists()


def test_a_branch_diff_loses_python_by_default(git_diff, tmp_path):
    """`git diff v0.5.13..branch` names a/python/sglang/...: the default strip takes a/ and
    python/ (the --no-index diff, its x/ and y/ dropped, reads so); a file outside the
    package (docs/) is listed as ignored."""
    text = git_diff.replace(" a/x/python/", " a/python/").replace(" b/y/python/", " b/python/")
    assert "--- a/python/sglang/srt/server_args.py" in text
    text += "diff --git a/docs/x.md b/docs/x.md\n--- a/docs/x.md\n+++ b/docs/x.md\n"
    text += "@@ -1 +1 @@\n-a\n+b\n"
    (tmp_path / "edit.diff").write_text(text)
    code, out = new_patchset(
        tmp_path / "ps", "mine@1.0.0", "--from-diff", str(tmp_path / "edit.diff")
    )
    assert code == 0, out
    assert results(tmp_path / "ps" / "mine" / "1.0.0") == SHIPPED_RESULTS
    assert has_row(out, "docs/x.md", "ignored")


def test_like_copies_tables_and_their_data(ddtree_site, tmp_path):
    patchsets = with_ddtree(tmp_path, "1.1.0")
    code, out = new_patchset(patchsets, "mine@1.0.0", "--from-tree", str(ddtree_site),
                             "--like", "ddtree@1.1.0", "--description", "my edit")  # fmt: skip
    assert code == 0, out
    root, like = patchsets / "mine" / "1.0.0", patchsets / "ddtree" / "1.1.0"
    spec = tomllib.loads((root / "patchset.toml").read_text())
    lent = tomllib.loads((like / "patchset.toml").read_text())
    assert spec["description"] == "my edit"
    for table in ("smoke", "serve", "lossless"):
        assert spec[table] == lent[table]
    for ref in lent["lossless"]["references"]:
        assert (root / ref).read_bytes() == (like / ref).read_bytes()
    lock = json.loads((root / "patchset.lock.json").read_text())
    assert lock["references"] == json.loads((like / "patchset.lock.json").read_text())["references"]


def test_dry_run_writes_nothing_and_lists_ignored(ddtree_site, tmp_path):
    site = linked_copy(ddtree_site, tmp_path / "site")
    write_file(site / "sglang/srt/__pycache__/server_args.cpython-311.pyc", b"\0\1compiled")
    write_file(site / "sglang/srt/stale.pyc", b"\0\1compiled")
    write_file(site / "numpy/__init__.py", b"# another package\n")
    so = next((site / "sglang/srt/grpc").glob("_core*.so"))
    write_file(so, so.read_bytes() + b"\0rebuilt")  # a changed build output: ignored too
    patchsets = tmp_path / "ps"
    patchsets.mkdir()
    code, out = new_patchset(patchsets, "mine@1.0.0", "--from-tree", str(site), "--dry-run")
    assert code == 0, out
    assert list(patchsets.iterdir()) == []
    assert "dry run: nothing written" in out and "wrote" not in out
    rebuilt = f"sglang/srt/grpc/{so.name}"
    for ignored in ("sglang/srt/__pycache__/", "sglang/srt/stale.pyc", "numpy/", rebuilt):
        assert has_row(out, ignored, "ignored")
    assert has_row(out, "sglang/srt/speculative/ddtree_utils.py", "added", 325, 0)
    # negative control: the same run without --dry-run writes, and ignores them still
    code, out = new_patchset(patchsets, "mine@1.0.0", "--from-tree", str(site))
    assert code == 0, out
    assert results(patchsets / "mine" / "1.0.0") == SHIPPED_RESULTS
