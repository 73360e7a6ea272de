"""Export a patchset as artifacts other engines roll out: an OCI image (base + one patch
layer), Kubernetes manifests, a directory to bind-mount under Slurm.

Why the standard library and not an OCI library: `olot` (PyPI, containers/olot) appends
layers of whole files to an OCI layout, but writes no whiteouts, does not copy owners and
modes from the base's entries and reads no `docker save` tarball; all three are needed here,
and tarfile/gzip/hashlib/json do the rest in a few hundred lines. Pushing to a registry is
left to `skopeo copy oci:DIR docker://...` (docs/kubernetes.md).
"""

from ddtree_deploy.export.image_locate import Located, locate_in_image
from ddtree_deploy.export.image_read import BaseImage, open_base
from ddtree_deploy.export.image_view import ImageView
from ddtree_deploy.export.layer import LayerEntry, PatchLayer, plan_layer, write_layer
from ddtree_deploy.export.oci import OciExport, export_oci
from ddtree_deploy.export.results import compute_results

__all__ = [
    "BaseImage",
    "ImageView",
    "LayerEntry",
    "Located",
    "OciExport",
    "PatchLayer",
    "compute_results",
    "export_oci",
    "locate_in_image",
    "open_base",
    "plan_layer",
    "write_layer",
]
