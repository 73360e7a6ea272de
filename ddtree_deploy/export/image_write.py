"""Write the patched image: an OCI image layout directory and a `docker load`-able tarball.

The new manifest lists the base's layers by their digests (their blobs copied unchanged) and
the one patch layer; the config is the base's with the patch layer's diff_id, a history line
and labels added, so Entrypoint, Cmd, Env, WorkingDir and the rest stay as the base has them.
The tarball holds the same layout plus a legacy `manifest.json`, which Docker < 25 loads.
"""

from __future__ import annotations

import copy
import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_deploy.export.image_read import (
    DOCKER_MANIFEST,
    OCI_MANIFEST,
    BaseImage,
    BlobStore,
    blob_name,
    open_blob,
    sha256_digest,
)
from ddtree_deploy.export.layer import PatchLayer

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
LABEL_PREFIX = "io.ddtree-deploy"
TARBALL = "image.tar"


@dataclass(frozen=True)
class WrittenImage:
    """What the export wrote: the manifest's digest, the layout dir and the tarball."""

    manifest_digest: str
    config_digest: str
    layer: PatchLayer
    layout: Path
    tarball: Path
    tag: str


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def build_config(
    base: BaseImage, layer: PatchLayer, labels: dict[str, str], created_by: str
) -> dict[str, Any]:
    """Return the new image config: the base's plus the layer's diff_id, history and labels."""
    config = copy.deepcopy(base.config)
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    config["rootfs"]["diff_ids"] = [*base.diff_ids, layer.diff_id]
    inner = config.setdefault("config", {})
    inner["Labels"] = {**(inner.get("Labels") or {}), **labels}
    step = {"created_by": created_by, "comment": "ddtree-deploy export oci"}
    if base.config.get("created"):
        step["created"] = str(base.config["created"])  # no clock: the same export, same bytes
    config["history"] = [*(config.get("history") or []), step]
    return config


def write_image(
    base: BaseImage,
    store: BlobStore,
    layer: PatchLayer,
    labels: dict[str, str],
    created_by: str,
    out: Path,
    tag: str,
) -> WrittenImage:
    """Write out/oci (layout) and out/image.tar; returns what was written. Raises OSError."""
    docker = base.is_docker_schema
    config = build_config(base, layer, labels, created_by)
    config_raw = _canonical(config)
    layer_media = DOCKER_LAYER_GZIP if docker else OCI_LAYER_GZIP
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
        "config": {
            "mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
            "digest": sha256_digest(config_raw),
            "size": len(config_raw),
        },
        "layers": [
            *(
                {"mediaType": b.media_type, "digest": b.digest, "size": b.size_bytes}
                for b in base.layers
            ),
            {"mediaType": layer_media, "digest": layer.digest, "size": len(layer.blob)},
        ],
    }
    if not docker:
        manifest["annotations"] = {
            "org.opencontainers.image.base.digest": base.pinned_digest,
            **{k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)},
        }
    manifest_raw = _canonical(manifest)
    manifest_digest = sha256_digest(manifest_raw)
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": manifest["mediaType"],
                "digest": manifest_digest,
                "size": len(manifest_raw),
                "annotations": {
                    "org.opencontainers.image.ref.name": tag.rpartition(":")[2],
                    "io.containerd.image.name": tag,
                },
            }
        ],
    }
    layout = out / "oci"
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for blob in base.layers:
        target = layout / blob_name(blob.digest)
        if target.exists():
            continue
        local = store.local_path(blob)
        if local is not None:  # a layout dir: the kernel copies (copy_file_range/sendfile)
            shutil.copyfile(local, target)
            continue
        with open_blob(store, blob) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    small = {
        layer.digest: layer.blob,
        sha256_digest(config_raw): config_raw,
        manifest_digest: manifest_raw,
    }
    for digest, data in small.items():
        (layout / blob_name(digest)).write_bytes(data)
    (layout / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_bytes(_canonical(index))
    legacy = [
        {
            "Config": blob_name(sha256_digest(config_raw)),
            "RepoTags": [tag],
            "Layers": [blob_name(b.digest) for b in base.layers] + [blob_name(layer.digest)],
        }
    ]
    (layout / "manifest.json").write_bytes(json.dumps(legacy, sort_keys=True).encode())
    tarball = out / TARBALL
    _write_tarball(layout, tarball)
    return WrittenImage(manifest_digest, sha256_digest(config_raw), layer, layout, tarball, tag)


def _write_tarball(layout: Path, tarball: Path) -> None:
    """Tar the layout (sorted, fixed mtimes, root owner) to `tarball`."""
    with tarfile.open(tarball, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in layout.rglob("*")):
            info = tar.gettarinfo(str(path), str(path.relative_to(layout)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_dir():
                tar.addfile(info)
            else:
                with path.open("rb") as stream:
                    tar.addfile(info, stream)
