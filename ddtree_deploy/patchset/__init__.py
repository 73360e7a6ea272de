"""Patchsets: models, loading, materialising from the pinned wheel, the lock, authoring."""

import typing

from ddtree_deploy.lazy import lazy_exports
from ddtree_deploy.patchset.load import (
    Patchset,
    default_patchsets_dir,
    list_patchsets,
    load_patchset,
    parse_patchset,
    parse_ref,
    resolve_patchset,
    version_key,
)
from ddtree_deploy.patchset.lock import build_lock, check_sources, verify_patchset, write_lock
from ddtree_deploy.patchset.models import FileEntry, LockedFile, PatchsetLock, PatchsetSpec
from ddtree_deploy.patchset.sources import read_source, source_file
from ddtree_deploy.patchset.store import STORE_DIR, blob_path, store_dir

if typing.TYPE_CHECKING:
    from ddtree_deploy.patchset.author import PatchsetPlan, plan_patchset, write_patchset
    from ddtree_deploy.patchset.capture import Capture, capture_from_diff, capture_from_tree
    from ddtree_deploy.patchset.copy import copy_version
    from ddtree_deploy.patchset.dedupe import DedupePlan, SharedSource, apply_dedupe, plan_dedupe

# Authoring names, imported on first use (`ddtree_deploy.lazy`): a push or a plan never
# authors, and these modules (zipfile, tempfile, diffing) are start-up time every command
# would pay.
__getattr__ = lazy_exports(
    __name__,
    {
        "author": ("PatchsetPlan", "plan_patchset", "write_patchset"),
        "capture": ("Capture", "capture_from_diff", "capture_from_tree"),
        "copy": ("copy_version",),
        "dedupe": ("DedupePlan", "SharedSource", "apply_dedupe", "plan_dedupe"),
    },
)


__all__ = [
    "Capture",
    "DedupePlan",
    "FileEntry",
    "LockedFile",
    "Patchset",
    "PatchsetLock",
    "PatchsetPlan",
    "PatchsetSpec",
    "STORE_DIR",
    "SharedSource",
    "apply_dedupe",
    "blob_path",
    "build_lock",
    "capture_from_diff",
    "capture_from_tree",
    "check_sources",
    "copy_version",
    "default_patchsets_dir",
    "list_patchsets",
    "load_patchset",
    "parse_patchset",
    "plan_dedupe",
    "plan_patchset",
    "read_source",
    "resolve_patchset",
    "source_file",
    "parse_ref",
    "store_dir",
    "verify_patchset",
    "version_key",
    "write_lock",
    "write_patchset",
]
