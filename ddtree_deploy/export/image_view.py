"""The base image's file system as a container sees it: its layers merged in order, with
whiteouts applied (the OCI image spec's rules, which overlayfs and Docker follow).

Only metadata is kept (tarfile.TarInfo per path); file bytes are read on demand, one pass
over each layer that holds a wanted path.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable
from dataclasses import dataclass

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export.image_read import BaseImage, BlobStore, open_layer_tar

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


def clean_path(name: str) -> str:
    """Return a layer member's path without `./` or `/` in front or a trailing `/`."""
    path = posixpath.normpath("/" + name).lstrip("/")
    return "" if path == "." else path


@dataclass(frozen=True)
class Entry:
    """One path of the merged view: which layer holds it and its tar header there."""

    layer: int
    info: tarfile.TarInfo


class ImageView:
    """Path -> Entry of the merged base file system, and reads of chosen files.

    keep: paths whose bytes are kept while the layers are read the first time (the few
    files an export will ask for), so read_files needs no second pass over a large image.
    """

    def __init__(
        self, image: BaseImage, store: BlobStore, keep: Callable[[str], bool] | None = None
    ) -> None:
        self.image, self.store = image, store
        self.entries: dict[str, Entry] = {}
        self._kept: dict[str, tuple[int, bytes]] = {}
        for number, blob in enumerate(image.layers):
            with open_layer_tar(store, blob) as tar:
                for info in tar:
                    self._apply(number, info)
                    path = clean_path(info.name)
                    if keep is not None and info.isreg() and keep(path):
                        stream = tar.extractfile(info)
                        if stream is not None:
                            self._kept[path] = (number, stream.read())

    def _apply(self, layer: int, info: tarfile.TarInfo) -> None:
        path = clean_path(info.name)
        if not path:
            return
        folder, base = posixpath.split(path)
        if base == OPAQUE:  # the folder's lower content is hidden; the folder stays
            self._drop_below(folder, keep_self=True, layer=layer)
            return
        if base.startswith(WHITEOUT):
            self._drop_below(posixpath.join(folder, base[len(WHITEOUT) :]), keep_self=False)
            return
        was = self.entries.get(path)
        if was is not None and was.info.isdir() and not info.isdir():
            self._drop_below(path, keep_self=True)  # a file over a folder hides its content
        self.entries[path] = Entry(layer, info)

    def _drop_below(self, path: str, keep_self: bool, layer: int | None = None) -> None:
        prefix = path + "/" if path else ""
        for name in [n for n in self.entries if n.startswith(prefix)]:
            if layer is None or self.entries[name].layer < layer:
                del self.entries[name]
        if not keep_self:
            self.entries.pop(path, None)

    def is_file(self, path: str) -> bool:
        entry = self.entries.get(path)
        return entry is not None and entry.info.isreg()

    def children(self, folder: str) -> list[str]:
        """Return the names directly inside `folder` (sorted)."""
        prefix = folder.rstrip("/") + "/"
        return sorted(
            {n[len(prefix) :].split("/")[0] for n in self.entries if n.startswith(prefix)}
        )

    def resolve(self, path: str) -> str:
        """Return `path` with symlinks of its folders followed inside the image (a venv's
        lib64 -> lib); raises ConfigError for a loop."""
        parts, done, hops = path.split("/"), "", 0
        while parts:
            done = posixpath.join(done, parts.pop(0)) if done else parts.pop(0)
            entry = self.entries.get(done)
            if entry is not None and entry.info.issym() and parts:
                hops += 1
                if hops > 40:
                    raise ConfigError(f"{self.image.source}: symlink loop at /{done}")
                target = entry.info.linkname
                joined = (
                    target
                    if target.startswith("/")
                    else posixpath.join(posixpath.dirname(done), target)
                )
                parts = [*clean_path(joined).split("/"), *parts]
                done = ""
        return done

    def read_files(self, paths: list[str]) -> dict[str, bytes]:
        """Return the bytes of each regular file in `paths` that the view holds (absent
        ones are left out), reading each layer once at most."""
        wanted: dict[int, set[str]] = {}
        found: dict[str, bytes] = {}
        for path in paths:
            if not self.is_file(path):
                continue
            layer = self.entries[path].layer
            kept = self._kept.get(path)
            if kept is not None and kept[0] == layer:
                found[path] = kept[1]
            else:
                wanted.setdefault(layer, set()).add(path)
        for number, names in sorted(wanted.items()):
            with open_layer_tar(self.store, self.image.layers[number]) as tar:
                for info in tar:
                    path = clean_path(info.name)
                    if path in names and info.isreg():
                        stream = tar.extractfile(info)
                        if stream is not None:
                            found[path] = stream.read()
        return found
