"""The base image as a `docker load`-able tarball, for `--verify` of the mount variants.

`export dir` and `export k8s --base` ship files mounted over the BASE image, so their gate
runs a container of the base with those mounts. A runtime loads a legacy `docker save`
tarball (Docker 20.10 reads no OCI layout), so the base's config and layers (as stored,
gzipped or not) are written into one tarball with a `manifest.json` naming them and the
tag to load them under. Nothing is decompressed or rewritten: the loaded image is the base.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from ddtree_deploy.export.image_read import blob_name, open_base, open_blob


def write_base_tarball(base_path: Path, out: Path, tag: str) -> str:
    """Write the base at `base_path` (OCI layout or docker save) as a loadable tarball at
    `out`, its image tagged `tag`; return the base's pinned digest. Raises ConfigError
    naming the base when it cannot be read."""
    with open_base(base_path) as (base, store), tarfile.open(out, "w") as tar:
        config_name = blob_name(base.config_digest)
        if not store.has(config_name):  # docker save: the config is named by its manifest
            config_name = json.loads(store.read("manifest.json"))[0]["Config"]
        _add(tar, "config.json", store.read(config_name))
        layers = []
        for number, blob in enumerate(base.layers):
            name = f"layers/{number}.tar"
            info = tarfile.TarInfo(name)
            info.size = blob.size_bytes
            with open_blob(store, blob) as stream:
                tar.addfile(info, stream)
            layers.append(name)
        manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": layers}]
        _add(tar, "manifest.json", json.dumps(manifest).encode())
        return base.pinned_digest


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
