"""Copy one patchset version elsewhere with the shared files it needs (a demo, a test, a fork).

Copying the NAME/VERSION folder alone leaves its ``shared = true`` entries without bytes: they
live in NAME/shared/. `copy_version` brings them along, either as blobs in the copy's own
store (the copy stays shared, like the original), or as files in the copy's own folder with
the flag dropped (a self-contained copy whose files can be edited in place). The lock is
copied as it is either way: its fields do not say where the bytes live.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import LOCK_NAME, SPEC_NAME, Patchset
from ddtree_deploy.patchset.models import PatchsetSpec
from ddtree_deploy.patchset.sources import read_source
from ddtree_deploy.patchset.store import put_blob

_SHARED_LINE = re.compile(r"^\s*shared\s*=\s*true\s*(#.*)?$")


def copy_version(
    patchset: Patchset, dest_root: Path, own_files: bool = False, lock: bool = True
) -> Path:
    """Copy ``patchset`` to ``dest_root`` (a NAME/VERSION folder) and return ``dest_root``.

    ``own_files``: write shared sources into the copy's folder and drop their flag; else
    put them in the store beside ``dest_root``. ``lock``: copy patchset.lock.json too;
    without it the copy's shared sources are written into its folder with the flag kept
    (only a lock names a blob), and `patchset lock` moves them into the store.
    Raises PatchsetError when a shared source cannot be read (missing or tampered blob).
    """
    shared = [(e, read_source(patchset, e)) for e in patchset.spec.files if e.shared]
    skip = ["__pycache__"] if lock else ["__pycache__", LOCK_NAME]
    shutil.copytree(patchset.root, dest_root, ignore=shutil.ignore_patterns(*skip))
    for entry, data in shared:
        if not own_files and lock:
            put_blob(dest_root, data)
            continue
        local = dest_root / entry.source
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
    if own_files and shared:
        spec_path = dest_root / SPEC_NAME
        spec_path.write_text(unflag_shared(spec_path.read_text("utf-8"), spec_path), "utf-8")
    return dest_root


def unflag_shared(text: str, spec_path: Path) -> str:
    """Return patchset.toml ``text`` without its ``shared = true`` lines.

    Raises PatchsetError naming ``spec_path`` unless the result is the same spec with every
    entry unshared (the flag written some other way: edit by hand).
    """
    kept = "".join(ln for ln in text.splitlines(keepends=True) if not _SHARED_LINE.match(ln))
    try:  # not parse_patchset: a copy may sit in another VERSION folder until re-versioned
        before = PatchsetSpec.model_validate(tomllib.loads(text))
        after = PatchsetSpec.model_validate(tomllib.loads(kept))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PatchsetError(f"{spec_path}: cannot parse: {exc}") from None
    wanted = [e.model_copy(update={"shared": False}) for e in before.files]
    if after.files != wanted or after.model_copy(update={"files": before.files}) != before:
        raise PatchsetError(f"{spec_path}: cannot drop `shared = true` by line; edit by hand")
    return kept
