"""Patchsets: models, loading, materialising from the pinned wheel, the lock."""

from ddtree_deploy.patchset.load import (
    Patchset,
    default_patchsets_dir,
    list_patchsets,
    load_patchset,
    parse_patchset,
    resolve_patchset,
    version_key,
)
from ddtree_deploy.patchset.lock import build_lock, check_sources, verify_patchset, write_lock
from ddtree_deploy.patchset.models import FileEntry, LockedFile, PatchsetLock, PatchsetSpec

__all__ = [
    "FileEntry",
    "LockedFile",
    "Patchset",
    "PatchsetLock",
    "PatchsetSpec",
    "build_lock",
    "check_sources",
    "default_patchsets_dir",
    "list_patchsets",
    "load_patchset",
    "parse_patchset",
    "resolve_patchset",
    "verify_patchset",
    "version_key",
    "write_lock",
]
