"""`patchset dedupe NAME`: keep a source file several versions hold byte for byte only once.

Every locked version of NAME is checked first (`check_sources`: its files match its lock).
A source whose bytes another version also holds, or that the store already has, moves into
the name's store (NAME/shared/sha256/<hex>) and its `[[file]]` entry gains `shared = true`.
No lock is touched: the lock's `source` and `source_sha256` already name the bytes, and the
resolver (`sources.py`) finds them in the store under that hash. Unlocked versions are left
alone (a shared entry needs a lock naming its hash); `patchset lock` moves their shared
copies once they are locked.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import SPEC_NAME, Patchset, load_patchset, parse_patchset
from ddtree_deploy.patchset.lock import check_sources
from ddtree_deploy.patchset.sources import drop_copies, read_source, store_copies
from ddtree_deploy.patchset.store import blob_path

_TABLE = re.compile(r"^\s*\[")
_PATH_KEY = re.compile(r'^\s*path\s*=\s*"([^"]*)"\s*(#.*)?$')
_SOURCE_KEY = re.compile(r"^\s*(new|patch)\s*=")


@dataclass(frozen=True)
class SharedSource:
    """One version's source file that dedupe moves into the store."""

    ref: str
    path: str  # the entry's path in site-packages
    source: str  # the source's path inside the version folder
    sha256: str  # the blob's name: the lock's source_sha256


@dataclass(frozen=True)
class DedupePlan:
    """What `dedupe` moves, and the versions it leaves alone because they have no lock."""

    moves: tuple[SharedSource, ...]
    unlocked: tuple[str, ...]


def plan_dedupe(versions: list[Patchset]) -> DedupePlan:
    """Return which sources of ``versions`` (all of one name) to move into the store.

    Raises PatchsetError when a locked version's files do not match its lock (dedupe must
    never store bytes a lock does not name).
    """
    found: dict[str, list[SharedSource]] = {}
    unlocked = []
    for patchset in versions:
        if patchset.lock is None:
            unlocked.append(patchset.ref)
            continue
        lock = check_sources(patchset)
        for entry in patchset.spec.files:
            if entry.shared:
                continue
            sha = lock.files[entry.path].source_sha256
            moved = SharedSource(patchset.ref, entry.path, entry.source, sha)
            found.setdefault(sha, []).append(moved)
    moves = [
        move
        for sha, group in found.items()
        if len(group) > 1 or blob_path(versions[0].root, sha).is_file()
        for move in group
    ]
    return DedupePlan(tuple(moves), tuple(unlocked))


def apply_dedupe(versions: list[Patchset], plan: DedupePlan) -> None:
    """Move ``plan``'s sources into the store and flag their entries ``shared = true``.

    Every new patchset.toml is built and parsed before anything is written; afterwards each
    changed version is loaded again and checked against its (unchanged) lock.
    """
    by_ref = {p.ref: p for p in versions}
    edits: dict[str, tuple[Patchset, str, list[tuple[Path, bytes]]]] = {}
    for ref in dict.fromkeys(m.ref for m in plan.moves):
        patchset = by_ref[ref]
        paths = {m.path for m in plan.moves if m.ref == ref}
        spec_path = patchset.root / SPEC_NAME
        text = flag_shared(spec_path.read_text(encoding="utf-8"), paths, spec_path)
        entries = [e for e in patchset.spec.files if e.path in paths]
        copies = [(patchset.source_path(e.source), read_source(patchset, e)) for e in entries]
        edits[ref] = (patchset, text, copies)
    for patchset, _, copies in edits.values():
        store_copies(patchset.root, copies)
    for patchset, text, copies in edits.values():
        (patchset.root / SPEC_NAME).write_text(text, encoding="utf-8")
        drop_copies(patchset.root, copies)
    for patchset, _, _ in edits.values():
        check_sources(load_patchset(patchset.root))


def flag_shared(text: str, paths: set[str], spec_path: Path) -> str:
    """Return patchset.toml ``text`` with ``shared = true`` added to the `[[file]]` entries
    whose path is in ``paths`` (after their `new`/`patch` line); comments and layout stay.

    Raises PatchsetError naming ``spec_path`` when the result is not the same spec with just
    those entries flagged (a layout this line editor does not understand: edit by hand).
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    in_file, path, source_at = False, "", -1

    def close_entry() -> None:
        if in_file and path in paths and source_at >= 0:
            out.insert(source_at + 1, "shared = true\n")

    for line in lines:
        if _TABLE.match(line):
            close_entry()
            in_file, path, source_at = line.strip() == "[[file]]", "", -1
        elif in_file and (match := _PATH_KEY.match(line)):
            path = match.group(1)
        elif in_file and _SOURCE_KEY.match(line):
            source_at = len(out)
        out.append(line if line.endswith("\n") else line + "\n")
    close_entry()
    edited = "".join(out)
    failed = PatchsetError(f"{spec_path}: cannot add `shared = true` by line; add it by hand")
    try:
        before = parse_patchset(tomllib.loads(text), spec_path)
        after = parse_patchset(tomllib.loads(edited), spec_path)
    except tomllib.TOMLDecodeError:
        raise failed from None
    wanted = [e.model_copy(update={"shared": True}) if e.path in paths else e for e in before.files]
    if after.files != wanted or after.model_copy(update={"files": before.files}) != before:
        raise failed
    return edited
