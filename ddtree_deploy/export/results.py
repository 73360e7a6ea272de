"""The bytes a push would install, computed from the base image's own files (pure).

Like the agent on a host: each file of the base is classified against the lock (at its
locked base: the diff applies; already at the result: kept; anything else: drift, refused),
a diff is applied with the same strict applier, and every result must hash to the lock's
result_sha256. No wheel and no network are needed: the base bytes come from the image.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from ddtree_deploy.agent.host.pure import apply_unified_diff, classify_file, sha256_bytes
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.export.image_locate import shown
from ddtree_deploy.stages.prepared import PreparedPatchset


def image_path(root: str, rel: str) -> str:
    """Return the in-image path (no leading /) of a patchset path under the package root."""
    return posixpath.join(root, rel)


def compute_results(
    prepared: PreparedPatchset, root: str, base_files: Mapping[str, bytes], where: str
) -> dict[str, bytes]:
    """Return in-image path -> result bytes for every file of `prepared`.

    base_files: the base's bytes of those paths (absent ones left out). Raises
    PatchsetError naming `where` (the base image) and the file when the base has drifted
    from the lock, a diff does not apply, or a result misses its locked hash.
    """
    out: dict[str, bytes] = {}
    for item in prepared.files:
        path = image_path(root, item.path)
        base = base_files.get(path)
        current = sha256_bytes(base) if base is not None else None
        state = classify_file(current, item.base_sha256, item.result_sha256, item.upgrade_sha256)
        if state == "drifted" or state == "upgrade":
            expected = item.base_sha256 or "no file"
            raise PatchsetError(
                f"{where}: /{shown(path)} is {current or 'absent'}, the lock of {prepared.ref} "
                f"expects {expected} (does the base hold another {prepared.package}?)"
            )
        if state == "unchanged":
            assert base is not None  # unchanged: the image already holds the result
            out[path] = base
            continue
        if item.kind == "new":
            result = item.source
        else:
            assert base is not None  # pending with a diff: the locked base is there
            try:
                result = apply_unified_diff(
                    base.decode("utf-8"), item.source.decode("utf-8")
                ).encode()
            except ValueError as exc:
                raise PatchsetError(f"{where}: {item.path}: diff does not apply: {exc}") from None
        if sha256_bytes(result) != item.result_sha256:
            raise PatchsetError(
                f"{where}: {item.path}: result does not match the lock's result_sha256"
            )
        out[path] = result
    return out
