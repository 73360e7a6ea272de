"""The patch layer: which entries it holds (planned, pure) and its byte-reproducible tar.gz.

Entries: each result file at its in-image path, with the owner and mode of the file it
replaces (a new file takes its folder's owner and mode 0644), the parent folders as the base
has them, and whiteouts (`.wh.<name>`) for every bytecode file of a replaced or added module
(`__pycache__/<mod>.*.pyc`, a legacy `<mod>.pyc`) and for each path the patchset deletes.
Every mtime is LAYER_MTIME and members are sorted, so two exports write the same bytes; the
gzip header carries mtime 0 and no file name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddtree_deploy.export.image_view import WHITEOUT, Entry

LAYER_MTIME = 0  # every member's mtime: the layer's bytes never depend on the clock
NEW_FILE_MODE = 0o644
GZIP_LEVEL = 6


@dataclass(frozen=True)
class LayerEntry:
    """One member of the patch layer: a folder, a file (with `data`) or a whiteout."""

    path: str  # no leading /
    kind: str  # "dir" | "file" | "whiteout"
    mode: int
    uid: int = 0
    gid: int = 0
    uname: str = ""
    gname: str = ""
    data: bytes = b""


@dataclass(frozen=True)
class PatchLayer:
    """The layer's gzipped bytes with its digest (of the gzip) and diff_id (of the tar)."""

    blob: bytes
    digest: str
    diff_id: str
    entries: tuple[LayerEntry, ...]


def _owned(kind: str, path: str, mode: int, like: Entry | None, data: bytes = b"") -> LayerEntry:
    info = like.info if like is not None else None
    return LayerEntry(
        path=path,
        kind=kind,
        mode=mode,
        uid=info.uid if info else 0,
        gid=info.gid if info else 0,
        uname=info.uname if info else "",
        gname=info.gname if info else "",
        data=data,
    )


def bytecode_of(
    module_path: str, names_in_folder: Sequence[str], names_in_cache: Sequence[str]
) -> list[str]:
    """Return the base's bytecode paths of the .py file `module_path`: `__pycache__/<stem>.*.pyc`
    (any interpreter tag, any optimisation level) and a legacy `<stem>.pyc` beside it."""
    folder, name = posixpath.split(module_path)
    stem = name[: -len(".py")]
    found = [
        posixpath.join(folder, "__pycache__", n)
        for n in names_in_cache
        if n.startswith(stem + ".")
        and n.endswith(".pyc")
        and n.count(".") >= 2
        and n.split(".")[0] == stem
    ]
    if f"{stem}.pyc" in names_in_folder:
        found.append(posixpath.join(folder, f"{stem}.pyc"))
    return sorted(found)


def plan_layer(
    results: Mapping[str, bytes],
    deleted: Sequence[str],
    base: Mapping[str, Entry],
    listing: Mapping[str, Sequence[str]],
) -> list[LayerEntry]:
    """Return the layer's entries, sorted by path (pure).

    results: in-image path -> result bytes; deleted: in-image paths to remove; base: the
    base's merged view (path -> Entry); listing: folder -> names it holds in the base (for
    each folder of a result and its __pycache__).
    """
    out: dict[str, LayerEntry] = {}
    for path, data in results.items():
        folder = posixpath.dirname(path)
        old = base.get(path)
        mode = old.info.mode if old is not None else NEW_FILE_MODE
        out[path] = _owned("file", path, mode, old or base.get(folder), data)
        parts = folder.split("/")
        for depth in range(1, len(parts) + 1):
            parent = "/".join(parts[:depth])
            have = base.get(parent)
            out.setdefault(parent, _owned("dir", parent, have.info.mode if have else 0o755, have))
        if path.endswith(".py"):
            cache = posixpath.join(folder, "__pycache__")
            for stale in bytecode_of(path, listing.get(folder, ()), listing.get(cache, ())):
                _add_whiteout(out, stale, base)
    for path in deleted:
        _add_whiteout(out, path, base)
    return [out[p] for p in sorted(out)]


def _add_whiteout(out: dict[str, LayerEntry], path: str, base: Mapping[str, Entry]) -> None:
    folder, name = posixpath.split(path)
    marker = posixpath.join(folder, WHITEOUT + name)
    out[marker] = _owned("whiteout", marker, 0, base.get(path))
    parts = folder.split("/")
    for depth in range(1, len(parts) + 1):
        parent = "/".join(parts[:depth])
        have = base.get(parent)
        out.setdefault(parent, _owned("dir", parent, have.info.mode if have else 0o755, have))


def write_layer(entries: Sequence[LayerEntry]) -> PatchLayer:
    """Return the layer as a gzipped tar (PAX headers, sorted members, fixed mtimes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path + ("/" if entry.kind == "dir" else ""))
            info.mtime = LAYER_MTIME
            info.mode = entry.mode & 0o7777
            info.uid, info.gid, info.uname, info.gname = (
                entry.uid,
                entry.gid,
                entry.uname,
                entry.gname,
            )
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    tar_bytes = raw.getvalue()
    packed = io.BytesIO()
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=GZIP_LEVEL
    ) as gz:
        gz.write(tar_bytes)
    blob = packed.getvalue()
    return PatchLayer(
        blob=blob,
        digest="sha256:" + hashlib.sha256(blob).hexdigest(),
        diff_id="sha256:" + hashlib.sha256(tar_bytes).hexdigest(),
        entries=tuple(entries),
    )
