"""`patchset diff A B > d.patch` is a patch `git apply` accepts in a site-packages holding A,
and applying it gives B's results byte for byte; the table goes to stderr, --json (here or
the root's) replaces the patch with one JSON object. Real wheel, real git."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import fetch_wheel, materialize
from tests.patchset.conftest import linked_copy
from tests.support import REPO, run_cli

DDTREE = REPO / "patchsets" / "ddtree"
COMMON = ("--patchsets-dir", str(REPO / "patchsets"))


def git_apply(patch: Path, tree: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`git apply [extra] patch` run in `tree` (not a repository: git works as `patch -p1`)."""
    return subprocess.run(
        ["git", "apply", *extra, str(patch)], cwd=tree, capture_output=True, text=True
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_piped_diff_applies_to_a_tree_holding_a_and_gives_b(
    tmp_path: Path, ddtree_site: Path, pristine_site: Path
) -> None:
    shown = run_cli("patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0", *COMMON)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "ddtree@1.0.0 (sglang==0.5.13.post1) -> ddtree@1.1.0" in shown.stderr  # the table
    assert shown.stdout.startswith("--- a/sglang/srt/server_args.py\n")
    patch = tmp_path / "d.patch"
    patch.write_text(shown.stdout)
    # ddtree_site: the pristine wheel's sglang/ with 1.0.0's results, as a host holds it
    tree = linked_copy(ddtree_site, tmp_path / "site")
    check = git_apply(patch, tree, "--check")
    assert check.returncode == 0, check.stderr
    applied = git_apply(patch, tree)
    assert applied.returncode == 0, applied.stderr
    b = load_patchset(DDTREE / "1.1.0")
    for item in materialize(b, fetch_wheel(b.spec.target)):
        assert (tree / item.entry.path).read_bytes() == item.result, item.entry.path
    # negative control: the pristine tree does not hold 1.0.0, so the patch does not apply
    bare = git_apply(patch, linked_copy(pristine_site, tmp_path / "bare"), "--check")
    assert bare.returncode != 0


def test_no_line_of_the_patch_is_wrapped_and_json_replaces_it() -> None:
    """Lines longer than 80 columns come through whole when piped (they were wrapped), and
    --json, given to `diff` or to the root, writes only the JSON object."""
    shown = run_cli(
        "patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0", *COMMON, env={"COLUMNS": "80"}
    )
    data = json.loads(
        run_cli("--json", "patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0", *COMMON).stdout
    )
    assert shown.stdout == "".join(f["diff"] for f in data["files"])
    assert max(len(line) for line in shown.stdout.splitlines()) > 80
