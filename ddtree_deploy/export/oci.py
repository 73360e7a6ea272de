"""`export oci`: the base image plus one patch layer holding a patchset's locked results.

Steps: read the base (OCI layout or docker save tarball), merge its layers into a view,
find the target package from the image's metadata, compute the results from the image's
own base files, plan and write the layer, write the new layout and tarball.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.agent.host.pure import sha256_bytes
from ddtree_deploy.export.image_locate import Located, keep_for_export, locate_in_image
from ddtree_deploy.export.image_read import open_base
from ddtree_deploy.export.image_view import ImageView
from ddtree_deploy.export.image_write import LABEL_PREFIX, WrittenImage, write_image
from ddtree_deploy.export.layer import plan_layer, write_layer
from ddtree_deploy.export.results import compute_results, image_path
from ddtree_deploy.patchset import Patchset
from ddtree_deploy.patchset.load import LOCK_NAME
from ddtree_deploy.stages.prepared import PreparedPatchset


@dataclass(frozen=True)
class OciExport:
    """One export's outcome: where the package was found and what was written."""

    located: Located
    written: WrittenImage
    base_digest: str
    lock_sha256: str
    results: tuple[str, ...]  # in-image paths of the result files
    whiteouts: tuple[str, ...]  # in-image paths the layer hides


def lock_sha256(patchset: Patchset) -> str:
    """Return the sha256 of the patchset's lock file as it is on disk."""
    return sha256_bytes((patchset.root / LOCK_NAME).read_bytes())


def export_labels(
    prepared: PreparedPatchset, base_digest: str, lock_sha: str, located: Located
) -> dict[str, str]:
    """Return the image labels an export adds (all under io.ddtree-deploy.)."""
    serve = prepared.serve.args if prepared.serve else []
    return {
        f"{LABEL_PREFIX}.patchset": prepared.ref,
        f"{LABEL_PREFIX}.base.digest": base_digest,
        f"{LABEL_PREFIX}.lock.sha256": lock_sha,
        f"{LABEL_PREFIX}.target": f"{prepared.package}=={prepared.target_version}",
        f"{LABEL_PREFIX}.root": "/" + located.root,
        f"{LABEL_PREFIX}.serve.args": json.dumps(list(serve)),
    }


def export_oci(
    patchset: Patchset,
    prepared: PreparedPatchset,
    base_path: Path,
    out: Path,
    tag: str,
    deleted: tuple[str, ...] = (),
) -> OciExport:
    """Write the patched image to out/oci and out/image.tar; returns what was done.

    `deleted`: patchset paths the layer removes (whiteouts; the patchset format has no
    delete entry yet, so callers pass ()). Raises ConfigError / PatchsetError naming the
    base image and the problem before anything is written; OSError while writing.
    """
    with open_base(base_path) as (base, store):
        keep = keep_for_export(prepared.package, [f.path for f in prepared.files])
        view = ImageView(base, store, keep)
        located = locate_in_image(view, prepared.package, prepared.target_version)
        wanted = [image_path(located.root, f.path) for f in prepared.files]
        results = compute_results(prepared, located.root, view.read_files(wanted), str(base_path))
        gone = [image_path(located.root, rel) for rel in deleted]
        folders = {posixpath.dirname(p) for p in results}
        listing = {
            f: view.children(f)
            for f in folders | {posixpath.join(f, "__pycache__") for f in folders}
        }
        entries = plan_layer(results, gone, view.entries, listing)
        layer = write_layer(entries)
        lock_sha = lock_sha256(patchset)
        labels = export_labels(prepared, base.pinned_digest, lock_sha, located)
        out.mkdir(parents=True, exist_ok=True)
        written = write_image(
            base, store, layer, labels, f"ddtree-deploy export oci -p {prepared.ref}", out, tag
        )
    return OciExport(
        located=located,
        written=written,
        base_digest=base.pinned_digest,
        lock_sha256=lock_sha,
        results=tuple(sorted(results)),
        whiteouts=tuple(e.path for e in entries if e.kind == "whiteout"),
    )
