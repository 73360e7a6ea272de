"""The content-addressed store of one patchset name: source files several versions share.

A blob lives at ``patchsets/NAME/shared/sha256/<hex>``, named by the sha256 of its bytes.
The name is the content, so a blob can never change under a version that uses it: a newer
version whose shared file differs gets another hash and so another blob, and a released
version keeps resolving the blob its own lock names. Reading a blob checks its bytes against
its name, so an edited ("tampered") store is refused rather than shipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ddtree_deploy.agent.host.pure import sha256_bytes
from ddtree_deploy.errors import PatchsetError

STORE_DIR = "shared"
HASH_DIR = "sha256"
_HEX = re.compile(r"^[0-9a-f]{64}$")


def store_dir(patchset_root: Path) -> Path:
    """Return the store of the version at ``patchset_root`` (NAME/VERSION): NAME/shared/sha256."""
    return patchset_root.parent / STORE_DIR / HASH_DIR


def blob_path(patchset_root: Path, sha256: str) -> Path:
    """Return where the blob ``sha256`` of this version's name lives (it may not exist).

    Raises PatchsetError when ``sha256`` is not 64 lowercase hex digits (a forged lock could
    otherwise name a path outside the store).
    """
    if not _HEX.match(sha256):
        raise PatchsetError(f"{patchset_root}: {sha256!r} is not a sha256 (64 hex digits)")
    return store_dir(patchset_root) / sha256


def check_blob(path: Path, data: bytes) -> bytes:
    """Return ``data`` (read from blob ``path``) if its sha256 is the blob's name.

    Raises PatchsetError naming the blob and both hashes otherwise (a tampered store).
    """
    found = sha256_bytes(data)
    if found != path.name:
        raise PatchsetError(
            f"{path}: tampered store: the blob's sha256 is {found}, not its name; "
            f"restore it from git (`git checkout -- {path.name}` in its folder)"
        )
    return data


def put_blob(patchset_root: Path, data: bytes) -> Path:
    """Store ``data`` in the store of ``patchset_root``'s name; returns the blob's path.

    A blob already there is left as it is once its bytes are checked (the same content has
    the same name); a new one is written to a temporary file and renamed into place, so a
    reader never sees half a blob. Raises PatchsetError when an existing blob is tampered.
    """
    path = blob_path(patchset_root, sha256_bytes(data))
    if path.is_file():
        check_blob(path, path.read_bytes())
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path
