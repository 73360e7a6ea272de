"""Patchsets: models, loading, materialising from the pinned wheel, the lock."""

from ddtree_deploy.patchset.copy import copy_version
from ddtree_deploy.patchset.dedupe import DedupePlan, SharedSource, apply_dedupe, plan_dedupe
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
from ddtree_deploy.patchset.sources import read_source, source_file
from ddtree_deploy.patchset.store import STORE_DIR, blob_path, store_dir

__all__ = [
    "STORE_DIR",
    "DedupePlan",
    "FileEntry",
    "LockedFile",
    "Patchset",
    "SharedSource",
    "PatchsetLock",
    "PatchsetSpec",
    "apply_dedupe",
    "blob_path",
    "build_lock",
    "copy_version",
    "check_sources",
    "default_patchsets_dir",
    "list_patchsets",
    "load_patchset",
    "parse_patchset",
    "plan_dedupe",
    "read_source",
    "resolve_patchset",
    "source_file",
    "store_dir",
    "verify_patchset",
    "version_key",
    "write_lock",
]
