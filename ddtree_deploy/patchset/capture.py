"""Capture what an edit changed against the pristine pinned wheel: from an edited tree or a
unified diff. Reads files and the wheel (zipfile: nothing is installed); no transport.

A `Capture` is the one thing every source produces (`--from-tree`, `--from-diff`, and
`--from-host`, which builds one from what a host's agent reports); `author.py` turns it into a
patchset directory.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_deploy.agent.host.pure import apply_unified_diff
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.diff_files import FileDiff, split_file_diffs
from ddtree_deploy.patchset.models import MAX_FILE_BYTES, check_relative_path

DEFAULT_PACKAGE = "sglang"
IGNORED_DIRS = frozenset({"__pycache__"})
# Build outputs and compiled code: never part of a patchset, whatever they hold.
IGNORED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")


@dataclass(frozen=True)
class Capture:
    """What an edit changed, paths relative to site-packages (`sglang/srt/x.py`).

    changed: edited files that exist in the wheel -> their edited bytes.
    added: files the wheel does not have -> their bytes.
    deleted: wheel files the edit removed (a patchset cannot delete: refused when planned).
    ignored: what was left out, listed for the user (`__pycache__/` dirs, .pyc/.so files
    the wheel does not have as they are, entries beside the package; dirs end with "/").
    source: where it came from, in words ("tree DIR", "diff FILE").
    """

    changed: dict[str, bytes]
    added: dict[str, bytes]
    deleted: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    source: str = ""


def is_ignored(rel: str) -> bool:
    """Return whether `rel` is a build output a capture leaves out (.pyc, .so, __pycache__)."""
    parts = rel.split("/")
    return rel.endswith(IGNORED_SUFFIXES) or any(p in IGNORED_DIRS for p in parts[:-1])


def find_package_dir(directory: Path, package: str = DEFAULT_PACKAGE) -> Path:
    """Return the edited package in `directory`: DIR/PACKAGE (site-packages, a fork's
    python/), or DIR itself when DIR is the package (named PACKAGE, with __init__.py).

    Raises PatchsetError saying what to pass instead.
    """
    if not directory.is_dir():
        raise PatchsetError(f"{directory}: not a directory")
    if (directory / package).is_dir():
        return directory / package
    if directory.name == package and (directory / "__init__.py").is_file():
        return directory
    fork = (directory / "python" / package).is_dir()
    hint = " (a fork's checkout? pass its python/)" if fork else ""
    raise PatchsetError(
        f"{directory}: no {package}/ package in it{hint}; pass the folder holding {package}/ "
        f"(a venv's site-packages, a fork's python/) or the {package} package itself"
    )


def capture_from_tree(directory: Path, wheel: Path, package: str = DEFAULT_PACKAGE) -> Capture:
    """Return what the package in `directory` (see `find_package_dir`) changed against `wheel`.

    Every file under the package is compared with the wheel's (size and CRC-32 from the
    wheel's index first, so unchanged files cost no decompression). Raises PatchsetError for a
    changed or added binary file or one over the size limit, and for wheel files missing from
    the tree (`describe_missing`: counted, not listed: a partial tree misses hundreds).
    """
    root = find_package_dir(directory, package)
    ignored: list[str] = []
    if root != directory:  # everything beside the package: other packages, dist-info...
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.name != package:
                ignored.append(entry.name + ("/" if entry.is_dir() else ""))
    changed: dict[str, bytes] = {}
    added: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as zf:
        infos = {
            i.filename: i
            for i in zf.infolist()
            if not i.is_dir() and i.filename.startswith(package + "/")
        }
        seen: set[str] = set()
        for rel, path in _walk_package(root, package, ignored):
            seen.add(rel)
            with open(path, "rb") as fh:
                data = fh.read()
            info = infos.get(rel)
            if info is not None and info.file_size == len(data) and info.CRC == zlib.crc32(data):
                continue  # as the wheel has it (a build output too: part of the install)
            if is_ignored(rel):
                ignored.append(rel)
                continue
            _check_text(path, data, "changed" if info is not None else "not in the wheel")
            (changed if info is not None else added)[rel] = data
    missing = sorted(rel for rel in infos if rel not in seen and not is_ignored(rel))
    if missing:
        raise PatchsetError(describe_missing(directory, missing, package))
    return Capture(changed, added, [], ignored, source=f"tree {directory}")


MISSING_NAMED = 3  # a partial tree misses hundreds of files: name a few, count the rest


def describe_missing(directory: Path, missing: list[str], package: str) -> str:
    """The refusal of a tree that lacks wheel files: how many, the first few by name, and
    the way out (a partial tree is almost always a few edited files copied alone)."""
    shown = ", ".join(missing[:MISSING_NAMED])
    more = len(missing) - MISSING_NAMED
    listed = f"{shown} and {more} more" if more > 0 else shown
    return (
        f"tree {directory}: {len(missing)} file(s) missing ({listed}): a --from-tree folder "
        f"must hold the whole {package} package as installed, and a patchset cannot delete "
        "files; for a few edited files use --from-diff"
    )


def _walk_package(root: Path, package: str, ignored: list[str]) -> list[tuple[str, str]]:
    """Return (path relative to site-packages, file path) for every file under `root` worth
    reading; what is left unread (__pycache__ dirs, symlinks) is appended to `ignored`.
    (os.scandir, not Path: a site-packages' sglang has 3,000+ files.)"""
    found: list[tuple[str, str]] = []
    pending = [(str(root), f"{package}/")]
    while pending:
        here, rel_here = pending.pop()
        with os.scandir(here) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            rel = rel_here + entry.name
            if entry.is_symlink():
                ignored.append(rel + ("/" if entry.is_dir() else ""))
            elif entry.is_dir():
                if entry.name in IGNORED_DIRS:
                    ignored.append(rel + "/")
                else:
                    pending.append((entry.path, rel + "/"))
            elif entry.is_file():
                found.append((rel, entry.path))
    return sorted(found)


def _check_text(path: str, data: bytes, what: str) -> None:
    """Refuse a file a patchset cannot carry: binary (NUL bytes, not UTF-8) or too large."""
    if len(data) > MAX_FILE_BYTES:
        raise PatchsetError(f"{path}: {what}, {len(data)} bytes (limit {MAX_FILE_BYTES})")
    try:
        if b"\0" not in data:
            data.decode("utf-8")
            return
    except UnicodeDecodeError:
        pass
    raise PatchsetError(f"{path}: a binary file ({what}); a patchset holds text files only")


def capture_from_diff(
    diff_path: Path, strip: int | None, wheel: Path, package: str = DEFAULT_PACKAGE
) -> Capture:
    """Return what the unified diff at `diff_path` changes, applied to `wheel`'s files.

    Paths lose `strip` leading components (as `patch -pN`); None strips one (git's a/ b/,
    diff -ruN's two folder names) and then a `python/` in front of the package (a fork's
    layout). A side that is absent (/dev/null, new/deleted file mode, diff -N's epoch date) or
    a file the wheel lacks makes an added or deleted file; files outside the package (docs/,
    test/ in a whole repository's diff) are ignored and listed. Raises PatchsetError naming
    the diff line for a path that escapes (`..`), a file listed twice, a hunk that does not
    apply; or when no file lands in the package (a wrong --strip).
    """
    label = str(diff_path)
    try:
        text = diff_path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise PatchsetError(f"{diff_path}: not found") from None
    except UnicodeDecodeError:
        raise PatchsetError(f"{diff_path}: not UTF-8 text (is it a diff?)") from None
    changed: dict[str, bytes] = {}
    added: dict[str, bytes] = {}
    deleted: list[str] = []
    ignored: list[str] = []  # files outside the package (a whole repository's diff)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for section in split_file_diffs(text, label):
            path = _section_path(section, strip, label)
            if not in_package(path, package):
                ignored.append(path or section.new_path)
                continue
            try:
                check_relative_path(path, "path")
            except ValueError as exc:
                raise PatchsetError(f"{label}: line {section.line}: {exc}") from None
            if path in changed or path in added or path in deleted:
                raise PatchsetError(f"{label}: line {section.line}: {path} is in the diff twice")
            if section.new_absent:
                deleted.append(path)
                continue
            base = zf.read(path) if path in names else None
            if section.old_absent and base is not None:
                raise PatchsetError(
                    f"{label}: line {section.line}: the diff adds {path}, but {wheel.name} "
                    "has it: was the diff made against another version?"
                )
            result = _apply(section, path, base, label, wheel.name)
            if base is None:
                added[path] = result
            elif result != base:
                changed[path] = result
    if ignored and not (changed or added or deleted):
        how = "1 leading component" if strip is None else f"{strip} leading component(s)"
        raise PatchsetError(
            f"{label}: no file of the diff is inside the {package}/ package after stripping "
            f"{how} (the first reads {ignored[0]!r}); set --strip N"
        )
    return Capture(changed, added, sorted(deleted), ignored, source=f"diff {diff_path}")


def _apply(section: FileDiff, path: str, base: bytes | None, label: str, wheel: str) -> bytes:
    """Return `section` applied to `base` (b"" for a file the wheel lacks); raises."""
    where = f"{label}: line {section.line}: {path}"
    try:
        base_text = (base or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise PatchsetError(f"{where}: a binary file in {wheel}; text files only") from None
    try:
        return apply_unified_diff(base_text, section.hunks).encode("utf-8")
    except ValueError as exc:
        state = "a file it lacks" if base is None else "its file"
        raise PatchsetError(f"{where}: does not apply to {state} in {wheel}: {exc}") from None


def _section_path(section: FileDiff, strip: int | None, label: str) -> str:
    """Return the stripped path a section names; both sides must agree (no renames)."""
    where = f"{label}: line {section.line}"
    try:
        old = None if section.old_absent else strip_path(section.old_path, strip)
        new = None if section.new_absent else strip_path(section.new_path, strip)
    except PatchsetError as exc:
        raise PatchsetError(f"{where}: {exc}") from None
    if old is not None and new is not None and old != new:
        raise PatchsetError(f"{where}: {old} -> {new}: renames are not supported")
    path = new or old
    if path is None:
        raise PatchsetError(f"{where}: both sides of the diff are absent")
    return path


def strip_path(raw: str, strip: int | None, package: str = DEFAULT_PACKAGE) -> str:
    """Return the header path `raw` without its prefix (see `capture_from_diff`): what should
    be a path relative to site-packages, which `in_package` checks.

    Raises PatchsetError when `raw` could leave its tree (`..`, absolute).
    """
    parts = raw.split("/")
    if ".." in parts or (raw.startswith("/") and strip is None):
        raise PatchsetError(f"path {raw!r} escapes the {package}/ package (.. or absolute)")
    if strip is None:
        parts = parts[1:]
        if parts[:2] == ["python", package]:
            parts = parts[1:]
    else:
        parts = parts[strip:]
    return "/".join(parts)


def in_package(path: str, package: str = DEFAULT_PACKAGE) -> bool:
    """Return whether the stripped `path` is a file inside `package`/."""
    return path.startswith(package + "/") and len(path) > len(package) + 1
