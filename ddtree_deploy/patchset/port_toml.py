"""Edit a patchset.toml's text for its port: the few keys that change, comments kept.

A port changes the top-level `version`, adds (or replaces) `ported_from`, sets
`[target].version`, and rewrites or drops the `[[file]]` tables of files whose source kind
changed or that left the patchset. Everything else keeps its bytes. The edited text is parsed
back and compared with the intended data, so an edit this line-based approach gets wrong is
refused instead of written.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.models import FileEntry

_HEADER = re.compile(r"^\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")
_KEY = r"^{}\s*="
_PATH = re.compile(r'^path\s*=\s*"([^"]*)"')


def edit_spec_text(
    text: str,
    version: str,
    target_version: str,
    ported_from: str,
    entries: dict[str, FileEntry | None],
) -> str:
    """Return `text` (a patchset.toml) with the port's changes.

    `entries` maps a file's path to its new entry, or to None to drop it; files not named
    keep their table. Raises PatchsetError when the result does not parse to the intended data.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    table = ""
    wrote_ported = False
    for block_table, block in _blocks(lines):
        table = block_table
        if table == "file" and (path := _path_of(block)) in entries:
            out.extend(_file_block(entries[path], block))
            continue
        for line in block:
            if table in ("", "target") and re.match(_KEY.format("version"), line):
                line = f"version = {json.dumps(version if table == '' else target_version)}\n"
                if table == "" and not wrote_ported:
                    out.append(line)
                    line = f"ported_from = {json.dumps(ported_from)}\n"
                    wrote_ported = True
            elif table == "" and re.match(_KEY.format("ported_from"), line):
                continue  # a port of a port: the line written after `version` replaces it
            out.append(line)
    edited = "".join(out)
    wanted = _intended(tomllib.loads(text), version, target_version, ported_from, entries)
    if not wrote_ported or tomllib.loads(edited) != wanted:
        raise PatchsetError("cannot edit this patchset.toml by line; edit it by hand")
    return edited


def _blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Split toml lines into (table name, its lines) runs; the top level is named ""."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        header = _HEADER.match(line.strip()) if line.startswith("[") else None
        if header:
            blocks.append((header.group(1), []))
        blocks[-1][1].append(line)
    return blocks


def _path_of(block: list[str]) -> str | None:
    for line in block:
        match = _PATH.match(line)
        if match:
            return match.group(1)
    return None


def _file_block(entry: FileEntry | None, block: list[str]) -> list[str]:
    """The [[file]] table for `entry` (nothing when dropped), keeping the block's trailing
    blank lines so the tables after it stay spaced as before."""
    trailing = len(block) - len("".join(block).rstrip("\n").splitlines(keepends=True))
    if entry is None:
        return []
    key = "new" if entry.kind == "new" else "patch"
    table = f"[[file]]\npath = {json.dumps(entry.path)}\n{key} = {json.dumps(entry.source)}\n"
    return [table, *(["\n"] * max(trailing, 0))]


def _intended(
    raw: dict[str, Any],
    version: str,
    target_version: str,
    ported_from: str,
    entries: dict[str, FileEntry | None],
) -> dict[str, Any]:
    """The data the edited text must parse to."""
    files = []
    for item in raw.get("file", []):
        if item.get("path") not in entries:
            files.append(item)
            continue
        entry = entries[item["path"]]
        if entry is not None:
            key = "new" if entry.kind == "new" else "patch"
            files.append({"path": entry.path, key: entry.source})
    wanted = {**raw, "version": version, "ported_from": ported_from, "file": files}
    wanted["target"] = {**raw.get("target", {}), "version": target_version}
    return wanted
