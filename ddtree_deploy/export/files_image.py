"""A files-only OCI image (one layer: the result files at `<package>/...`, no base) for the
Kubernetes image volume (KEP-4639), which mounts an image's file system read-only."""

from __future__ import annotations

import json
from pathlib import Path

from ddtree_deploy.export.image_read import blob_name, sha256_digest
from ddtree_deploy.export.layer import NEW_FILE_MODE, LayerEntry, write_layer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def write_files_image(files: dict[str, bytes], out: Path, labels: dict[str, str]) -> str:
    """Write an OCI layout of `files` (path -> bytes) at `out`; return its manifest digest.
    Byte-reproducible like the patch layer (sorted, fixed mtimes, root-owned, 0644)."""
    dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
    entries = [LayerEntry(path=d, kind="dir", mode=0o755) for d in dirs]
    entries += [
        LayerEntry(path=p, kind="file", mode=NEW_FILE_MODE, data=files[p]) for p in sorted(files)
    ]
    layer = write_layer(sorted(entries, key=lambda e: e.path))
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id]},
    }
    config_raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256_digest(config_raw),
            "size": len(config_raw),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": layer.digest,
                "size": len(layer.blob),
            }
        ],
    }
    manifest_raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    digest = sha256_digest(manifest_raw)
    (out / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for data in (layer.blob, config_raw, manifest_raw):
        (out / blob_name(sha256_digest(data))).write_bytes(data)
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {
        "schemaVersion": 2,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest_raw)}],
    }
    (out / "index.json").write_text(json.dumps(index, sort_keys=True))
    return digest
