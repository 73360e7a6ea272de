"""Porting, the pure parts: the merge engine, the per-file outcomes, versions, the toml edit."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import parse_patchset
from ddtree_deploy.patchset.materialize import Materialized
from ddtree_deploy.patchset.merge import conflict_starts, find_markers, merge_texts
from ddtree_deploy.patchset.models import FileEntry, Target
from ddtree_deploy.patchset.port import (
    check_port_version,
    default_port_version,
    parse_to_arg,
    plan_port,
)
from ddtree_deploy.patchset.port_toml import edit_spec_text
from tests.support import DDTREE_100

LABELS = ("ours", "base", "theirs")
BASE = "".join(f"line {i}\n" for i in range(1, 21))
OLD = Target(package="sglang", version="0.5.13.post1")


def edit(text: str, number: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[number - 1] = new + "\n"
    return "".join(lines)


def test_apart_changes_merge_and_overlapping_ones_conflict():
    ours, theirs = edit(BASE, 3, "ours 3"), edit(BASE, 17, "theirs 17")
    merged = merge_texts(BASE, ours, theirs, LABELS)
    assert merged.conflicts == 0 and merged.text == edit(ours, 17, "theirs 17")
    clash = merge_texts(BASE, ours, edit(BASE, 3, "theirs 3"), LABELS)
    assert clash.conflicts == 1
    assert conflict_starts(clash.text) == [3]
    assert "<<<<<<< ours\nours 3\n||||||| base\nline 3\n=======\ntheirs 3\n>>>>>>> theirs\n" in (
        clash.text
    )
    assert len(find_markers(clash.text)) == 4
    assert find_markers(merged.text) == []  # the control: a clean merge has none


def test_a_missing_git_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PatchsetError, match="needs git on PATH"):
        merge_texts(BASE, BASE, BASE, LABELS)


def item(path: str, kind: str, base: str | None, result: str) -> Materialized:
    source = result if kind == "new" else "(diff)"
    entry = FileEntry(path=path, **{kind: f"src/{path}"})
    raw = None if base is None else base.encode()
    return Materialized(entry=entry, source=source.encode(), base=raw, result=result.encode())


def test_every_outcome_of_plan_port():
    ours_edit = edit(BASE, 3, "ours 3")
    cases = {
        # path: (old kind, base, ours (the old result), theirs or None, outcome, new kind)
        "p/clean.py": ("patch", BASE, ours_edit, BASE, "clean", "patch"),
        "p/merged.py": ("patch", BASE, ours_edit, edit(BASE, 17, "t"), "merged", "patch"),
        "p/conflict.py": ("patch", BASE, ours_edit, edit(BASE, 3, "t"), "conflict", "patch"),
        "p/gone.py": ("patch", BASE, ours_edit, None, "gone", None),
        "p/upstream.py": ("patch", BASE, ours_edit, ours_edit, "upstream", None),
        "p/carried.py": ("new", None, "mine\n", None, "carried", "new"),
        "p/collides.py": ("new", None, "mine\n", "theirs\n", "conflict", "patch"),
        "p/shipped.py": ("new", None, "mine\n", "mine\n", "upstream", None),
    }
    ours = [item(p, kind, base, result) for p, (kind, base, result, *_) in cases.items()]
    theirs = {p: None if c[3] is None else c[3].encode() for p, c in cases.items()}
    ported = {f.path: f for f in plan_port(ours, theirs, LABELS)}
    assert {p: (f.status, f.new_kind) for p, f in ported.items()} == {
        p: (c[4], c[5]) for p, c in cases.items()
    }
    assert ported["p/clean.py"].result == ours_edit
    assert ported["p/merged.py"].result == edit(ours_edit, 17, "t")
    assert find_markers(ported["p/conflict.py"].result or "")
    assert find_markers(ported["p/collides.py"].result or "")
    assert ported["p/gone.py"].result is None and ported["p/gone.py"].theirs_sha256 is None


def test_default_version_names_the_target_and_to_is_checked():
    to = Target(package="sglang", version="0.5.13")
    assert default_port_version("1.0.0", to) == "1.0.0+sglang0.5.13"
    assert default_port_version("1.0.0+sglang0.5.12", to) == "1.0.0+sglang0.5.13"
    post = Target(package="sglang", version="0.5.13.post1")
    assert check_port_version(default_port_version("2.0.0", post)) == "2.0.0+sglang0.5.13.post1"
    assert parse_to_arg("sglang==0.5.12", OLD) == Target(package="sglang", version="0.5.12")
    for bad, match in [
        ("sglang>=0.5", "give PACKAGE==VERSION"),
        ("vllm==0.5.12", "targets sglang, not vllm"),
        ("sglang==0.5.13.post1", "already targets"),
    ]:
        with pytest.raises(PatchsetError, match=match):
            parse_to_arg(bad, OLD)
    assert default_port_version("1.0.0-rc1", to) == "1.0.0-rc1+sglang0.5.13"
    for bad in ("1.0", "1.0.0 beta", "v1.0.0", "1.0.0-rc1+sglang0.5.13"):
        with pytest.raises(PatchsetError, match="not a patchset version"):
            check_port_version(bad)


def test_the_toml_edit_keeps_every_other_byte():
    text = (DDTREE_100 / "patchset.toml").read_text()
    edited = edit_spec_text(text, "1.0.0+sglang0.5.13", "0.5.13", "ddtree@1.0.0", {})
    added = [line for line in edited.splitlines() if line not in text.splitlines()]
    assert added == [
        'version = "1.0.0+sglang0.5.13"',
        'ported_from = "ddtree@1.0.0"',
        'version = "0.5.13"',
    ]
    assert len(edited.splitlines()) == len(text.splitlines()) + 1
    home = Path("/x/ddtree/1.0.0+sglang0.5.13/patchset.toml")
    spec = parse_patchset(tomllib.loads(edited), home)
    assert spec.ported_from == "ddtree@1.0.0" and spec.target.version == "0.5.13"
    again = edit_spec_text(edited, "1.0.0+sglang0.5.12", "0.5.12", "ddtree@1.0.0+x", {})
    assert again.count("ported_from") == 1 and 'ported_from = "ddtree@1.0.0+x"' in again


def test_the_toml_edit_rewrites_and_drops_file_tables():
    text = (DDTREE_100 / "patchset.toml").read_text()
    utils = "sglang/srt/speculative/ddtree_utils.py"
    as_patch = FileEntry(path=utils, patch="patches/ddtree_utils.py.diff")
    entries = {utils: as_patch, "sglang/srt/server_args.py": None}
    edited = tomllib.loads(edit_spec_text(text, "1.0.1", "0.5.12", "ddtree@1.0.0", entries))
    assert [f["path"] for f in edited["file"]] == [utils, "sglang/srt/speculative/spec_info.py"]
    assert edited["file"][0] == {"path": utils, "patch": "patches/ddtree_utils.py.diff"}
    assert edited["smoke"] == tomllib.loads(text)["smoke"]


def test_a_toml_the_line_edit_cannot_handle_is_refused():
    text = (DDTREE_100 / "patchset.toml").read_text()
    inline = text.replace('[target]\npackage = "sglang"\nversion = "0.5.13.post1"\n', "").replace(
        'description = "', 'target = { package = "sglang", version = "0.5.13.post1" }\n'
        'description = "',
    )  # fmt: skip
    assert tomllib.loads(inline)["target"]["version"] == "0.5.13.post1"
    with pytest.raises(PatchsetError, match="cannot edit this patchset.toml"):
        edit_spec_text(inline, "1.0.1", "0.5.12", "ddtree@1.0.0", {})
