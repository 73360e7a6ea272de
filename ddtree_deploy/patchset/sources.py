"""Where a patchset entry's bytes come from: the one resolver every reader uses.

An entry's source is the file (``new``) or diff (``patch``) its patchset.toml names. Unshared
entries live in the version's own folder. A ``shared = true`` entry lives once in the name's
content-addressed store (`store.py`) under the sha256 its lock records as ``source_sha256``;
while a version is being authored, a local copy at the entry's path wins, so a file can be
edited in place, and `patchset lock` then moves that copy into the store
(`move_shared_into_store`). The lock's fields are the same either way, so sharing a file
never changes a lock.
"""

from __future__ import annotations

from pathlib import Path

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import Patchset, new_version_hint
from ddtree_deploy.patchset.models import MAX_FILE_BYTES, FileEntry
from ddtree_deploy.patchset.store import blob_path, check_blob, put_blob, store_dir


def source_file(patchset: Patchset, entry: FileEntry) -> Path:
    """Return the path holding ``entry``'s bytes: its own file, else its blob in the store.

    A shared entry without a local copy needs the lock's ``source_sha256`` for it; raises
    PatchsetError naming the entry (and the hash when known) when there is no lock entry or
    no such blob.
    """
    local = patchset.source_path(entry.source)
    if not entry.shared or local.exists() or local.is_symlink():
        return local
    locked = patchset.lock.files.get(entry.path) if patchset.lock is not None else None
    if locked is None:
        then = (
            f"run `ddtree-deploy patchset lock {patchset.ref}`"
            if patchset.lock is None
            else new_version_hint(patchset.ref)
        )
        raise PatchsetError(
            f"{local}: shared file {entry.path!r} has no local copy and no lock entry naming "
            f"its sha256; put the file there and {then}"
        )
    blob = blob_path(patchset.root, locked.source_sha256)
    if not blob.exists():
        raise PatchsetError(
            f"{blob}: shared file {entry.path!r} ({entry.source}, sha256 "
            f"{locked.source_sha256}) is missing from the store"
        )
    return blob


def read_source(patchset: Patchset, entry: FileEntry) -> bytes:
    """Return ``entry``'s bytes (see `source_file`), checked for place, size and UTF-8 text.

    A local source must be a regular file inside the patchset; a blob a regular file inside
    the store whose bytes hash to its name. Raises PatchsetError naming the file.
    """
    path = source_file(patchset, entry)
    in_store = path.parent == store_dir(patchset.root)
    if not path.exists() and not path.is_symlink():
        raise PatchsetError(f"{patchset.root}: file {entry.path!r}: {entry.source} not found")
    home = (path.parent if in_store else patchset.root).resolve()
    if path.is_symlink() or not path.is_file() or home not in path.resolve().parents:
        where = "the store" if in_store else "the patchset"
        raise PatchsetError(f"{path}: must be a regular file inside {where}")
    data = path.read_bytes()
    if in_store:
        check_blob(path, data)
    if len(data) > MAX_FILE_BYTES:
        raise PatchsetError(f"{path}: {len(data)} bytes exceeds the {MAX_FILE_BYTES} byte limit")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchsetError(f"{path}: not UTF-8 text (binary files are not supported)") from None
    return data


def local_shared(patchset: Patchset) -> list[tuple[Path, bytes]]:
    """Return (path, bytes) of every shared entry's local copy (files being authored)."""
    found = []
    for entry in patchset.spec.files:
        local = patchset.source_path(entry.source)
        if entry.shared and local.is_file():
            found.append((local, read_source(patchset, entry)))
    return found


def store_copies(patchset_root: Path, copies: list[tuple[Path, bytes]]) -> None:
    """Store each (local path, bytes) of `local_shared` as a blob of the name's store."""
    for _, data in copies:
        put_blob(patchset_root, data)


def drop_copies(patchset_root: Path, copies: list[tuple[Path, bytes]]) -> None:
    """Delete each stored local copy and the folders it leaves empty in ``patchset_root``."""
    for path, _ in copies:
        path.unlink()
        prune_empty(path.parent, patchset_root)


def prune_empty(folder: Path, patchset_root: Path) -> None:
    """Remove ``folder`` and its parents while they are empty, stopping at ``patchset_root``."""
    while folder != patchset_root and patchset_root in folder.parents and folder.is_dir():
        if any(folder.iterdir()):
            return
        folder.rmdir()
        folder = folder.parent
