"""The ddtree patchset's diffs are well formed and name the files patchset.toml lists.

Applying them to pristine sglang is proven by `patchset lock`; this only checks shape.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.support import patchset_file

PATCHSET_DIR = Path(__file__).resolve().parents[2] / "patchsets" / "ddtree" / "1.0.0"
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def load_manifest() -> dict:
    """Return the parsed patchset.toml."""
    return tomllib.loads((PATCHSET_DIR / "patchset.toml").read_text())


def patched_files() -> list[dict]:
    """Return the [[file]] entries that carry a diff."""
    return [entry for entry in load_manifest()["file"] if "patch" in entry]


def test_manifest_targets_pinned_sglang() -> None:
    manifest = load_manifest()
    assert (manifest["name"], manifest["version"]) == ("ddtree", "1.0.0")
    assert manifest["target"] == {"package": "sglang", "version": "0.5.13.post1"}
    assert "ddtree" in manifest["smoke"]["suites"] and "gpu" in manifest["smoke"]["suites"]
    for entry in manifest["file"]:
        assert patchset_file(PATCHSET_DIR, entry["path"]).is_file()


@pytest.mark.parametrize("entry", patched_files(), ids=lambda e: e["path"])
def test_diff_names_its_file_and_counts_match(entry: dict) -> None:
    lines = patchset_file(PATCHSET_DIR, entry["path"]).read_text().splitlines()
    assert lines[0] == f"--- a/{entry['path']}"
    assert lines[1] == f"+++ b/{entry['path']}"
    assert sum(line.startswith("--- ") for line in lines) == 1, "one file per diff"
    body = lines[2:]
    hunks = 0
    i = 0
    while i < len(body):
        match = HUNK_HEADER.match(body[i])
        assert match, f"expected a hunk header, got {body[i]!r}"
        old_left = int(match.group(2) or 1)
        new_left = int(match.group(4) or 1)
        i += 1
        while old_left or new_left:
            tag = body[i][:1]
            assert tag in (" ", "-", "+"), f"bad line {body[i]!r}"
            old_left -= tag in (" ", "-")
            new_left -= tag in (" ", "+")
            i += 1
        assert old_left == new_left == 0
        hunks += 1
    assert hunks >= 1
