"""Patchsets: models, loading, materialising from the pinned wheel, the lock, authoring."""

from ddtree_deploy.patchset.author import PatchsetPlan, plan_patchset, write_patchset
from ddtree_deploy.patchset.capture import Capture, capture_from_diff, capture_from_tree
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
    "Capture",
    "FileEntry",
    "LockedFile",
    "Patchset",
    "PatchsetLock",
    "PatchsetPlan",
    "PatchsetSpec",
    "build_lock",
    "capture_from_diff",
    "capture_from_tree",
    "check_sources",
    "default_patchsets_dir",
    "list_patchsets",
    "load_patchset",
    "parse_patchset",
    "plan_patchset",
    "resolve_patchset",
    "verify_patchset",
    "version_key",
    "write_lock",
    "write_patchset",
]
