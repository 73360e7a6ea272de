"""Read a base image from disk: an OCI image layout directory or a `docker save` tarball.

No registry is reached: the operator brings the base image (`skopeo copy docker://... oci:DIR`
or `docker save IMAGE -o FILE`). Stdlib only (tarfile, json, hashlib): see `export/__init__.py`
for why no OCI library is used.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ddtree_deploy.errors import ConfigError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Blob:
    """One content-addressed blob of the base: where to read it and what it is."""

    digest: str  # "sha256:<hex>"
    size_bytes: int
    media_type: str


@dataclass(frozen=True)
class BaseImage:
    """The base image: its manifest (as bytes, so its digest stays the base's own), config
    and layers, and how to read any blob by digest.

    `manifest_digest` is the base manifest's digest; a `docker save` tarball of the legacy
    format holds no manifest, so it is None there and the config digest (the image ID)
    names the base instead.
    """

    source: Path
    manifest: dict[str, Any]
    manifest_digest: str | None
    config: dict[str, Any]
    config_digest: str
    layers: tuple[Blob, ...]
    diff_ids: tuple[str, ...]
    is_docker_schema: bool  # the base manifest uses Docker v2 media types

    @property
    def pinned_digest(self) -> str:
        """The digest naming the base: its manifest's, else its config's (image ID)."""
        return self.manifest_digest or self.config_digest


def sha256_digest(data: bytes) -> str:
    """Return "sha256:<hex>" of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ConfigError(f"{what}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what}: not a JSON object")
    return value


class BlobStore:
    """Read blobs of an OCI layout (a directory or inside a tarball) and of a legacy
    `docker save` tarball (files named by path)."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._tar = None if source.is_dir() else tarfile.open(source)  # noqa: SIM115
        self.legacy: dict[str, str] = {}  # docker save: layer digest -> its path in the tar

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()

    def has(self, name: str) -> bool:
        if self._tar is None:
            return (self.source / name).is_file()
        try:
            self._tar.getmember(name)
        except KeyError:
            return False
        return True

    def open(self, name: str) -> IO[bytes]:
        """A readable stream of the file `name`; raises ConfigError naming it if absent."""
        if self._tar is None:
            path = self.source / name
            if not path.is_file():
                raise ConfigError(f"{self.source}: {name} is missing")
            return path.open("rb")
        try:
            stream = self._tar.extractfile(name)
        except KeyError:
            stream = None
        if stream is None:
            raise ConfigError(f"{self.source}: {name} is missing from the tarball")
        return stream

    def local_path(self, blob: Blob) -> Path | None:
        """Return the blob's file when the store is a layout directory, else None."""
        if self._tar is not None or blob.digest in self.legacy:
            return None
        return self.source / blob_name(blob.digest)

    def size(self, name: str) -> int:
        """Return the size in bytes of the file `name`."""
        if self._tar is None:
            return (self.source / name).stat().st_size
        return self._tar.getmember(name).size

    def read(self, name: str) -> bytes:
        with self.open(name) as stream:
            return stream.read()


def blob_name(digest: str) -> str:
    """Return the layout path of a blob: blobs/<algorithm>/<hex>."""
    algorithm, _, hexa = digest.partition(":")
    if algorithm != "sha256" or len(hexa) != 64 or not all(c in "0123456789abcdef" for c in hexa):
        raise ConfigError(f"unsupported or malformed digest {digest!r}")
    return f"blobs/sha256/{hexa}"


@contextmanager
def open_base(source: Path, platform: str = "linux/amd64") -> Iterator[tuple[BaseImage, BlobStore]]:
    """Yield the base image at `source` and its blob store (closed on exit).

    An image index picks the manifest for `platform` (os/arch). Raises ConfigError naming
    the file and what is wrong.
    """
    if not source.exists():
        raise ConfigError(
            f"{source}: base image not found (an OCI layout dir or a docker save tar)"
        )
    if source.is_file() and not tarfile.is_tarfile(source):
        raise ConfigError(f"{source}: neither an OCI layout directory nor a tarball")
    store = BlobStore(source)
    try:
        if store.has("index.json"):
            image = _read_oci(store, platform)
        elif store.has("manifest.json"):
            image = _read_docker_save(store)
        else:
            raise ConfigError(
                f"{source}: no index.json (OCI layout) nor manifest.json (docker save)"
            )
        yield image, store
    finally:
        store.close()


def _read_oci(store: BlobStore, platform: str) -> BaseImage:
    index = _json(store.read("index.json"), f"{store.source}/index.json")
    descriptors = list(index.get("manifests") or [])
    while True:
        if len(descriptors) != 1:
            descriptors = [d for d in descriptors if _platform(d) == platform] or descriptors
        if len(descriptors) != 1:
            raise ConfigError(
                f"{store.source}: index.json lists {len(descriptors)} manifests; keep one image "
                f"in the layout (for {platform})"
            )
        desc = descriptors[0]
        raw = store.read(blob_name(str(desc.get("digest"))))
        if sha256_digest(raw) != desc.get("digest"):
            raise ConfigError(
                f"{store.source}: blob {desc.get('digest')} does not match its digest"
            )
        doc = _json(raw, f"{store.source}: manifest {desc.get('digest')}")
        media = doc.get("mediaType") or desc.get("mediaType")
        if media in (OCI_INDEX, DOCKER_LIST):
            descriptors = list(doc.get("manifests") or [])
            continue
        break
    config_desc = doc.get("config") or {}
    config_raw = store.read(blob_name(str(config_desc.get("digest"))))
    config = _json(config_raw, f"{store.source}: config")
    layers = tuple(
        Blob(str(d["digest"]), int(d["size"]), str(d["mediaType"])) for d in doc.get("layers", [])
    )
    return BaseImage(
        source=store.source,
        manifest=doc,
        manifest_digest=str(desc["digest"]),
        config=config,
        config_digest=sha256_digest(config_raw),
        layers=layers,
        diff_ids=_diff_ids(config, len(layers), store.source),
        is_docker_schema=media == DOCKER_MANIFEST,
    )


def _platform(desc: dict[str, Any]) -> str:
    plat = desc.get("platform") or {}
    return f"{plat.get('os')}/{plat.get('architecture')}"


def _read_docker_save(store: BlobStore) -> BaseImage:
    raw = json.loads(store.read("manifest.json"))
    if not isinstance(raw, list) or len(raw) != 1:
        raise ConfigError(f"{store.source}: manifest.json must describe exactly one image")
    entry = raw[0]
    config_raw = store.read(entry["Config"])
    config = _json(config_raw, f"{store.source}: {entry['Config']}")
    diff_ids = _diff_ids(config, len(entry["Layers"]), store.source)
    # a legacy save holds each layer as an uncompressed tar named by path: its digest is
    # its diff_id; the layer is copied into the new layout under that digest.
    layers = tuple(
        Blob(diff_id, store.size(name), OCI_LAYER_TAR)
        for diff_id, name in zip(diff_ids, entry["Layers"], strict=True)
    )
    legacy = {str(d): str(n) for d, n in zip(diff_ids, entry["Layers"], strict=True)}
    store.legacy = legacy
    return BaseImage(
        source=store.source,
        manifest={},
        manifest_digest=None,
        config=config,
        config_digest=sha256_digest(config_raw),
        layers=layers,
        diff_ids=diff_ids,
        is_docker_schema=False,
    )


def _diff_ids(config: dict[str, Any], count: int, source: Path) -> tuple[str, ...]:
    ids = tuple(str(d) for d in (config.get("rootfs") or {}).get("diff_ids") or [])
    if len(ids) != count:
        raise ConfigError(f"{source}: config lists {len(ids)} diff_ids for {count} layers")
    return ids


def open_blob(store: BlobStore, blob: Blob) -> IO[bytes]:
    """A stream of the blob's stored bytes (compressed as stored)."""
    if blob.digest in store.legacy:
        return store.open(store.legacy[blob.digest])
    return store.open(blob_name(blob.digest))


@contextmanager
def open_layer_tar(store: BlobStore, blob: Blob) -> Iterator[tarfile.TarFile]:
    """Yield the layer as a streaming tarfile (gzip undone when the blob is gzipped)."""
    with open_blob(store, blob) as raw:
        head = raw.read(2)
        rest = io.BufferedReader(_Prefixed(head, raw), 1 << 20)
        stream: Any = gzip.GzipFile(fileobj=rest) if head == b"\x1f\x8b" else rest
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            yield tar


class _Prefixed(io.RawIOBase):
    """A stream that yields `head` and then the rest of `stream` (to sniff gzip's magic)."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
