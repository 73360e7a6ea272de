"""`patchset new` refuses bad input: one clear error, exit 2, nothing under the patchsets dir.

The good runs beside each case (tests/patchset/test_author_capture.py) are the controls: the
same trees and diffs, unbroken, write a locked patchset.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.patchset.conftest import linked_copy, write_file
from tests.patchset.test_author_capture import new_patchset

SPEC_INFO = "sglang/srt/speculative/spec_info.py"


def snapshot(folder: Path) -> list[str]:
    """Every path under `folder`, hidden ones included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def ruN_diff(old: Path, new: Path, cwd: Path) -> bytes:
    """The real `diff -ruN OLD NEW` run in `cwd`."""
    done = subprocess.run(["diff", "-ruN", str(old), str(new)], cwd=cwd, capture_output=True)
    assert done.returncode == 1, done.stderr
    return done.stdout


def diff_file(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "edit.diff").write_text(text)
    return ["--from-diff", str(tmp_path / "edit.diff")]


# Each case: (pristine site, edited site, tmp) -> the `patchset new` arguments of a bad run.
Case = Callable[[Path, Path, Path], list[str]]


def tree_without_sglang(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    (tmp / "empty" / "python").mkdir(parents=True)
    return ["--from-tree", str(tmp / "empty")]


def a_diff_that_does_not_apply(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    (tmp / "old").symlink_to(pristine)
    (tmp / "new").symlink_to(edited)
    text = ruN_diff(Path("old"), Path("new"), tmp).decode()
    lines = text.splitlines(keepends=True)
    at = lines.index(next(ln for ln in lines if ln.startswith("+++ new/" + SPEC_INFO))) + 2
    context = next(i for i in range(at, len(lines)) if lines[i].startswith(" "))
    lines[context] = " # a context line that is not in 0.5.13.post1\n"
    return diff_file(tmp, "".join(lines))


def a_binary_file_in_the_tree(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    site = linked_copy(edited, tmp / "site")
    write_file(site / "sglang/srt/weights.bin", b"\x00\x01\x02binary")
    return ["--from-tree", str(site)]


def _binary_pair(pristine: Path, tmp: Path) -> None:
    for side, data in (("old", b"\x00one"), ("new", b"\x00two")):
        write_file(tmp / side / "sglang/srt/weights.bin", data)


def a_binary_file_in_a_diff(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    _binary_pair(pristine, tmp)
    text = ruN_diff(Path("old"), Path("new"), tmp).decode()
    assert text.startswith("Binary files old/sglang/srt/weights.bin")
    return diff_file(tmp, text)


def a_git_binary_patch(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    _binary_pair(pristine, tmp)
    done = subprocess.run(["git", "diff", "--no-index", "--binary", "old", "new"], cwd=tmp,
                          capture_output=True, text=True)  # fmt: skip
    assert "GIT binary patch" in done.stdout, done.stderr
    return [*diff_file(tmp, done.stdout), "--strip", "2"]


def a_path_escaping_the_package(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    return diff_file(
        tmp,
        "--- a/sglang/../../evil.py\n+++ b/sglang/../../evil.py\n@@ -0,0 +1 @@\n+import os\n",
    )


def a_deleted_file_in_the_tree(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    site = linked_copy(edited, tmp / "site")
    (site / "sglang/srt/speculative/eagle_utils.py").unlink()
    return ["--from-tree", str(site)]


def a_partial_tree(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    """Only the edited file copied out of a site-packages: the usual way to a partial tree."""
    write_file(tmp / "partial" / SPEC_INFO, (edited / SPEC_INFO).read_bytes())
    return ["--from-tree", str(tmp / "partial")]


def a_deleted_file_in_a_diff(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    text = (pristine / SPEC_INFO).read_text()
    body = "".join("-" + ln for ln in text.splitlines(keepends=True))
    header = f"diff --git a/{SPEC_INFO} b/{SPEC_INFO}\ndeleted file mode 100644\n"
    count = len(text.splitlines())
    return diff_file(
        tmp, f"{header}--- a/{SPEC_INFO}\n+++ /dev/null\n@@ -1,{count} +0,0 @@\n{body}"
    )


def a_tree_as_it_was_released(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    return ["--from-tree", str(pristine)]


def two_sources(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    return ["--from-tree", str(edited), *diff_file(tmp, "")]


def no_source(pristine: Path, edited: Path, tmp: Path) -> list[str]:
    return []


CASES: dict[str, tuple[Case, str]] = {
    "tree_without_sglang": (tree_without_sglang, "no sglang/ package in it"),
    "diff_does_not_apply": (
        a_diff_that_does_not_apply,
        f"{SPEC_INFO}: does not apply to its file in sglang-0.5.13.post1",
    ),
    "binary_in_tree": (a_binary_file_in_the_tree, "weights.bin: a binary file (not in the wheel)"),
    "binary_in_diff": (a_binary_file_in_a_diff, "line 1: a binary file (Binary files old/"),
    "git_binary_patch": (
        a_git_binary_patch,
        "a binary file (GIT binary patch in diff --git a/old/sglang/srt/weights.bin",
    ),
    "path_escaping": (a_path_escaping_the_package, "escapes the sglang/ package"),
    "deleted_in_tree": (
        a_deleted_file_in_the_tree,
        "1 file(s) missing (sglang/srt/speculative/eagle_utils.py)",
    ),
    "partial_tree": (a_partial_tree, "; for a few edited files use --from-diff"),
    "deleted_in_diff": (a_deleted_file_in_a_diff, f"which a patchset cannot do: {SPEC_INFO}"),
    "no_changes": (a_tree_as_it_was_released, "no changes against sglang==0.5.13.post1"),
    "two_sources": (two_sources, "(--from-tree and --from-diff given)"),
    "no_source": (no_source, "give exactly one source"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused(case, pristine_site, ddtree_site, tmp_path):
    make_args, expected = CASES[case]
    args = make_args(pristine_site, ddtree_site, tmp_path)
    patchsets = tmp_path / "patchsets"
    patchsets.mkdir()
    code, out = new_patchset(patchsets, "mine@1.0.0", *args)
    assert code == 2, out
    assert expected in out
    assert out.count("error:") == 1 and "Traceback" not in out
    assert snapshot(patchsets) == []


def test_an_existing_version_is_not_overwritten(ddtree_site, tmp_path):
    patchsets = tmp_path / "patchsets"
    (patchsets / "mine" / "1.0.0").mkdir(parents=True)
    code, out = new_patchset(patchsets, "mine@1.0.0", "--from-tree", str(ddtree_site))
    assert code == 2 and "mine/1.0.0: already exists" in out
    assert snapshot(patchsets) == ["mine", "mine/1.0.0"]
    # control: the next version is free
    code, out = new_patchset(patchsets, "mine@1.0.1", "--from-tree", str(ddtree_site), "--dry-run")
    assert code == 0, out


def test_an_unknown_target_version_fails_fast(ddtree_site, tmp_path, monkeypatch):
    """pip is asked (and answers at once: no index, an empty find-links folder); the error
    names the version. The cache is a temp dir, so nothing lands in the real one either."""
    (tmp_path / "links").mkdir()
    env = {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(tmp_path / "links"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "DDTREE_DEPLOY_CACHE": str(tmp_path / "cache"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    patchsets = tmp_path / "patchsets"
    patchsets.mkdir()
    argv = ["mine@1.0.0", "--from-tree", str(ddtree_site)]
    code, out = new_patchset(patchsets, *argv, target="sglang==0.0.0.999")
    assert code == 2 and "cannot download sglang==0.0.0.999" in out
    assert snapshot(patchsets) == [] and not list((tmp_path / "cache").rglob("*.whl"))


@pytest.mark.parametrize(
    ("target", "expected"),
    [("sglang", "expected PACKAGE==VERSION"), ("sglang==x y", "not a package name and version")],
)
def test_a_malformed_target_is_refused(target, expected, ddtree_site, tmp_path):
    code, out = new_patchset(tmp_path, "mine@1.0.0", "--from-tree", str(ddtree_site), target=target)
    assert code == 2 and expected in out


@pytest.mark.parametrize(
    ("ref", "expected"),
    [("mine", "NAME@VERSION"), ("Mine@1.0.0", "key 'name'"), ("mine@x", "key 'version'")],
)
def test_a_malformed_ref_is_refused(ref, expected, ddtree_site, tmp_path):
    code, out = new_patchset(tmp_path, ref, "--from-tree", str(ddtree_site))
    assert code == 2 and expected in out


def test_a_partial_tree_counts_what_is_missing_instead_of_listing_it(
    pristine_site, ddtree_site, tmp_path
):
    args = a_partial_tree(pristine_site, ddtree_site, tmp_path)
    patchsets = tmp_path / "patchsets"
    patchsets.mkdir()
    code, out = new_patchset(patchsets, "mine@1.0.0", *args)
    assert code == 2, out
    from ddtree_deploy.patchset.capture import is_ignored

    files = [p.relative_to(pristine_site).as_posix() for p in pristine_site.rglob("*")]
    wheel_files = [f for f in files if (pristine_site / f).is_file() and not is_ignored(f)]
    missing = len(wheel_files) - 1  # the one edited file is there
    folded = " ".join(out.split())
    assert f"{missing} file(s) missing (" in folded and f"and {missing - 3} more)" in folded
    assert folded.count("sglang/") < 10  # three named, not hundreds
