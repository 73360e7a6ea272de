"""The op that captures a hand-edited package: which of its files differ from the RECORD
pip wrote when it installed the wheel, and the bytes of those files only. Read-only."""

import base64
import os

from .locate import import_name, locate_package
from .pure import sha256_bytes
from .state import full_distribution
from .wire import Code, OpFailed
from .wire_capture import (
    CHANGED,
    EXTRA,
    MISSING,
    EditableRefusal,
    EditedFile,
    EditsResult,
    VersionRefusal,
)

PYCACHE = "__pycache__"
# Build outputs and compiled code: never part of a patchset (as patchset/capture.py skips).
BUILD_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")


def op_edits(ctx, args):
    """Return EditsResult: every file under the package that RECORD does not vouch for.

    A file RECORD lists (with a sha256) is "changed" when its bytes hash otherwise and
    "missing" when it is gone; a file under the package that RECORD does not list is
    "extra". `__pycache__` dirs and build outputs (.pyc, .so, ...) are skipped and listed as
    ignored. The bytes of changed and extra files come back base64'd unless they are binary
    (NUL bytes, not UTF-8), a symlink, over args.max_file_bytes, or past
    args.max_total_bytes in all: the entry's `error` says so.

    Raises OpFailed: package_not_found (not installed, or not importable where it is
    installed), version_mismatch (not args.target_version; data: installed), and
    editable_install (the dist's RECORD lists no files of an editable source tree).
    """
    dist = full_distribution(args.package)
    if dist is None:
        raise OpFailed(Code.PACKAGE_NOT_FOUND, "%s is not installed" % args.package)
    if args.target_version is not None and dist.version != args.target_version:
        message = "installed %s is %s, the capture targets %s" % (
            args.package,
            dist.version,
            args.target_version,
        )
        raise OpFailed(Code.VERSION_MISMATCH, message, VersionRefusal(dist.version))
    located = locate_package(args.package, dist)
    if located.kind == "editable":
        where = located.root or "its source tree"
        message = "editable install: capture with --from-tree %s" % where
        raise OpFailed(Code.EDITABLE_INSTALL, message, EditableRefusal(located.root))
    if located.error:
        raise OpFailed(Code.PACKAGE_NOT_FOUND, located.error)
    top = import_name(args.package)
    listed, recorded = recorded_hashes(dist, top)
    on_disk, ignored = package_files(located.root, top)
    on_disk -= listed - set(recorded)
    budget = {"left": int(args.max_total_bytes)}
    files = []
    for rel in sorted(set(recorded) | on_disk):
        entry = _compare(located.root, rel, recorded.get(rel), rel in on_disk, args, budget)
        if entry is not None:
            files.append(entry)
    return EditsResult(
        package_version=dist.version,
        package_root=located.root,
        recorded=len(recorded),
        files=files,
        ignored=ignored,
    )


def _skipped(rel):
    """True for a path inside a `__pycache__` dir or a build output (.pyc, .so, ...)."""
    return PYCACHE in rel.split("/") or rel.endswith(BUILD_SUFFIXES)


def recorded_hashes(dist, top):
    """Return (listed, hashes) for the files RECORD lists under package dir `top`,
    byte-code left out: listed, the set of their paths; hashes, {path: sha256 hex} of those
    with a sha256 (RECORD's is urlsafe base64 without padding). A file listed without one
    was written by the installer, not taken from the wheel: it is neither checked nor extra.
    """
    listed, hashes = set(), {}
    for f in dist.files or ():
        rel = str(f).replace(os.sep, "/")
        if not rel.startswith(top + "/") or _skipped(rel):
            continue
        listed.add(rel)
        if f.hash and f.hash.mode == "sha256":
            value = f.hash.value
            hashes[rel] = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    return listed, hashes


def package_files(root, top):
    """Return (found, ignored) under `root`/`top`, paths relative to `root` ("/"-separated).

    found: the set of every file and symlink (symlinked dirs are listed, not entered);
    ignored: the sorted `__pycache__/` dirs (not entered) and build outputs left out.
    """
    found, ignored = set(), []
    start = os.path.join(root, top)
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if PYCACHE in dirnames:
            ignored.append(rel_dir + "/" + PYCACHE + "/")
        dirnames[:] = [d for d in dirnames if d != PYCACHE]
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in filenames + linked:
            rel = rel_dir + "/" + name
            if _skipped(rel):
                ignored.append(rel)
            else:
                found.add(rel)
    return found, sorted(ignored)


def _compare(root, rel, record_sha, exists, args, budget):
    """Return the EditedFile for `rel` (None when it matches RECORD). `budget["left"]`: the
    bytes the answer may still carry; lowered by what this entry sends."""
    if not exists:
        return EditedFile(rel, MISSING, None, record_sha, 0)
    full = os.path.join(root, rel)
    status = EXTRA if record_sha is None else CHANGED
    if os.path.islink(full):
        return EditedFile(
            rel, status, None, record_sha, 0, error="a symlink: only regular files are captured"
        )
    with open(full, "rb") as fh:
        data = fh.read()
    sha = sha256_bytes(data)
    if sha == record_sha:
        return None
    size = len(data)
    error = _refusal(data, args, budget["left"])
    if error is not None:
        return EditedFile(rel, status, sha, record_sha, size, error=error)
    budget["left"] -= size
    content = base64.b64encode(data).decode("ascii")
    return EditedFile(rel, status, sha, record_sha, size, content_b64=content)


def _refusal(data, args, left_bytes):
    """Return why `data` cannot be sent back (over args' byte limits, `left_bytes` being
    what the total has left; binary), or None."""
    if len(data) > args.max_file_bytes:
        return "%d bytes exceeds the %d byte limit per file" % (len(data), args.max_file_bytes)
    if len(data) > left_bytes:
        return "the edited files exceed the %d byte limit for all files together" % (
            args.max_total_bytes
        )
    try:
        if b"\0" not in data:
            data.decode("utf-8")
            return None
    except UnicodeDecodeError:
        pass
    return "a binary file (NUL bytes or not UTF-8); a patchset holds text files only"
