"""The pure parts of `patchset new`: splitting diffs, stripping paths, naming patches, the
plan, and the TOML writer (no wheel, no files)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ddtree_deploy.agent.host.pure import apply_unified_diff
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.author import patch_names, plan_patchset
from ddtree_deploy.patchset.capture import Capture, in_package, strip_path
from ddtree_deploy.patchset.diff_files import split_file_diffs
from ddtree_deploy.patchset.models import Target
from ddtree_deploy.patchset.toml_text import dump_toml
from tests.support import REPO

TARGET = Target(package="sglang", version="0.5.13.post1")
ROOT = Path("/ps/mine/1.0.0")


def test_a_removed_line_that_reads_like_a_header_stays_in_its_hunk():
    diff = (
        "--- a/sglang/x.py\n+++ b/sglang/x.py\n@@ -1,2 +1,2 @@\n--- old\n+++ new\n kept\n"
        "--- a/sglang/y.py\n+++ b/sglang/y.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    x, y = split_file_diffs(diff, "d")
    assert (x.new_path, y.new_path, y.line) == ("b/sglang/x.py", "b/sglang/y.py", 7)
    assert apply_unified_diff("-- old\nkept\n", x.hunks) == "++ new\nkept\n"


def test_an_empty_line_in_a_hunk_is_an_empty_context_line():
    diff = "--- a/sglang/x.py\n+++ b/sglang/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n\n c\n"
    (only,) = split_file_diffs(diff, "d")
    assert apply_unified_diff("a\n\nc\n", only.hunks) == "b\n\nc\n"


@pytest.mark.parametrize(
    ("diff", "expected"),
    [
        ("--- a/sglang/x.py\n+++ b/sglang/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n", "hunk cut short"),
        ("@@ -1 +1 @@\n-a\n+b\n", "a hunk without its ---/+++ file header"),
        ("Only in new/sglang: x.py\n", "make it with `diff -ruN`"),
        ("diff --git a/x b/y\nrename from x\nrename to y\n", "renames and copies"),
        ("just some text\n", "no file diffs found"),
        ("--- a/sglang/x.py\n+++ b/sglang/x.py\n", "has no hunks"),
    ],
)
def test_unreadable_diffs_are_refused(diff, expected):
    with pytest.raises(PatchsetError) as err:
        split_file_diffs(diff, "d")
    assert str(err.value).startswith("d: ") and expected in str(err.value)


@pytest.mark.parametrize(
    ("raw", "strip", "expected"),
    [
        ("a/sglang/srt/x.py", None, "sglang/srt/x.py"),
        ("a/python/sglang/srt/x.py", None, "sglang/srt/x.py"),
        ("old/sglang/x.py", None, "sglang/x.py"),
        ("a/x/python/sglang/x.py", 3, "sglang/x.py"),
        ("sglang/x.py", 0, "sglang/x.py"),
    ],
)
def test_paths_are_stripped_to_site_packages(raw, strip, expected):
    assert strip_path(raw, strip) == expected


@pytest.mark.parametrize("raw", ["a/sglang/../../etc/passwd", "/etc/sglang/x.py"])
def test_paths_escaping_are_refused(raw):
    with pytest.raises(PatchsetError, match="escapes the sglang/ package"):
        strip_path(raw, None)


@pytest.mark.parametrize(
    ("raw", "strip"),
    [
        ("a/python/sglang/x.py", 1),
        ("a/numpy/x.py", None),
        ("a/sglang", None),
        ("a/sglangx/y", None),
    ],
)
def test_paths_outside_the_package_are_told_apart(raw, strip):
    assert not in_package(strip_path(raw, strip))  # explicit --strip: no python/ guessing
    assert in_package("sglang/x.py")  # control


def test_clashing_basenames_get_unique_patch_names():
    paths = ["sglang/a/__init__.py", "sglang/b/__init__.py", "sglang/srt/server_args.py"]
    names = patch_names(paths)
    assert names["sglang/srt/server_args.py"] == "server_args.py.diff"
    assert names["sglang/a/__init__.py"] == "a-__init__.py.diff"
    assert len(set(names.values())) == 3


def test_the_plan_holds_diffs_new_files_rows_and_a_default_smoke():
    capture = Capture(
        changed={"sglang/x.py": b"a\nB\n"},
        added={"sglang/new.py": b"x = 1\ny = 2\n"},
        ignored=["sglang/__pycache__/"],
        source="tree T",
    )
    plan = plan_patchset(ROOT, TARGET, capture, {"sglang/x.py": b"a\nb\n"})
    assert [(r.path, r.kind, r.plus_lines, r.minus_lines) for r in plan.rows] == [
        ("sglang/new.py", "added", 2, 0),
        ("sglang/x.py", "changed", 1, 1),
        ("sglang/__pycache__/", "ignored", 0, 0),
    ]
    assert apply_unified_diff("a\nb\n", plan.sources["patches/x.py.diff"].decode()) == "a\nB\n"
    assert plan.sources["files/sglang/new.py"] == b"x = 1\ny = 2\n"
    spec = tomllib.loads(plan.spec_text)
    assert (spec["name"], spec["version"], spec["description"]) == (
        "mine",
        "1.0.0",
        "captured from tree T",
    )
    assert spec["smoke"]["suites"] == ["integrity", "compile", "imports"]


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        (
            Capture({}, {}, deleted=["sglang/a.py", "sglang/b.py"], source="s"),
            "sglang/a.py, sglang/b.py",
        ),
        (Capture({}, {}, source="s"), "no changes against sglang==0.5.13.post1"),
        (Capture({}, {"sglang/a b.py": b"x\n"}, source="s"), "characters outside"),
    ],
)
def test_plans_that_cannot_be_a_patchset_are_refused(capture, expected):
    with pytest.raises(PatchsetError) as err:
        plan_patchset(ROOT, TARGET, capture, {})
    assert expected in str(err.value)


def test_toml_round_trips_a_shipped_spec():
    raw = tomllib.loads((REPO / "patchsets/ddtree/1.1.0/patchset.toml").read_text())
    assert tomllib.loads(dump_toml(raw)) == raw
    odd = {"description": 'quote " back\\slash \x7f tab\t', "x": {"f": 1.5e-05, "on": True}}
    assert tomllib.loads(dump_toml(odd)) == odd


def test_toml_refuses_what_it_cannot_write():
    with pytest.raises(PatchsetError, match="cannot write a set value"):
        dump_toml({"x": {1, 2}})
