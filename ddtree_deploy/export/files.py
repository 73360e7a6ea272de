"""The result files of a patchset for engines that mount files over the image rather than
build one (ConfigMap, image volume, Slurm bind mounts), and what such a mount cannot do.

A mount can replace a file but not delete one, and cannot remove the image's stale bytecode
of a replaced module: every mount variant therefore points Python's bytecode cache elsewhere
(PYTHONPYCACHEPREFIX, Python >= 3.8), so the image's `__pycache__` is never read.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export.image_locate import Located, keep_for_export, locate_in_image
from ddtree_deploy.export.image_read import open_base
from ddtree_deploy.export.image_view import ImageView
from ddtree_deploy.export.results import compute_results, image_path
from ddtree_deploy.stages.prepared import PreparedPatchset

PYCACHE_ENV = "PYTHONPYCACHEPREFIX"
PYCACHE_DIR = "/tmp/ddtree-pycache"  # an emptyDir / the job's tmp: fresh bytecode only


@dataclass(frozen=True)
class ResultFiles:
    """Patchset path -> result bytes, and where the package lives in the image."""

    root: str  # in-image, with a leading /
    files: dict[str, bytes]
    located: Located | None = None

    def mount_path(self, rel: str) -> str:
        """Return the absolute in-image path of a patchset path."""
        return posixpath.join(self.root, rel)


def results_from_base(prepared: PreparedPatchset, base: Path) -> ResultFiles:
    """Return the results computed from the base image's own files (as `export oci` does);
    raises ConfigError / PatchsetError naming the image."""
    with open_base(base) as (image, store):
        keep = keep_for_export(prepared.package, [f.path for f in prepared.files])
        view = ImageView(image, store, keep)
        located = locate_in_image(view, prepared.package, prepared.target_version)
        wanted = [image_path(located.root, f.path) for f in prepared.files]
        found = compute_results(prepared, located.root, view.read_files(wanted), str(base))
    prefix = located.root + "/"
    files = {path[len(prefix) :]: data for path, data in found.items()}
    return ResultFiles(root="/" + located.root, files=files, located=located)


def refuse_deletions(deleted: tuple[str, ...], variant: str) -> None:
    """Raise ConfigError when the patchset deletes files: a mount cannot delete one."""
    if deleted:
        raise ConfigError(
            f"{variant}: the patchset deletes {list(deleted)}; a mount can replace a file but "
            "not delete one: use `export oci` (a whiteout in the image layer)"
        )
