"""Kubernetes artifacts of a patchset (pure: each builder returns file name -> document).

- kustomize/: an overlay: the `images` transformer pins the base image to the patched image
  by digest; the server container's `args` get the patchset's [serve] flags. Deployment and
  StatefulSet take a strategic-merge patch (containers merge by name); a LeaderWorkerSet is
  a custom resource, whose lists kustomize replaces whole under a strategic merge, so it gets
  JSON 6902 `replace` ops on the leader's and the worker's container args instead.
- helm/values-ddtree.yaml: image.repository, image.tag/digest, extra args (the key names of
  most sglang charts; adjust to yours).
- configmap/: the result files in a ConfigMap, each mounted with `subPath` over the image's
  file; refused over 1 MiB (the API server's object limit) or when a file must be deleted.
- image-volume/: the result files as an OCI image mounted as a volume (KEP-4639, beta and on
  by default from Kubernetes 1.33), each file with `subPath`.
Files are written as JSON, which is YAML 1.2: kubectl, kustomize and helm read them as is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export.files import PYCACHE_DIR, PYCACHE_ENV, ResultFiles, refuse_deletions

CONFIGMAP_MAX_BYTES = 1024 * 1024
KINDS = ("deployment", "statefulset", "lws")
_API = {"deployment": "apps/v1", "statefulset": "apps/v1", "lws": "leaderworkerset.x-k8s.io/v1"}
_KIND = {"deployment": "Deployment", "statefulset": "StatefulSet", "lws": "LeaderWorkerSet"}
LWS_TEMPLATES = (
    "/spec/leaderWorkerTemplate/leaderTemplate",
    "/spec/leaderWorkerTemplate/workerTemplate",
)
VOLUME = "ddtree-files"
CACHE_VOLUME = "ddtree-pycache"
_KEY_BAD = re.compile(r"[^-._a-zA-Z0-9]")

Doc = dict[str, Any]


@dataclass(frozen=True)
class Workload:
    """The operator's workload the overlay patches."""

    kind: str  # one of KINDS
    name: str
    container: str = "sglang"
    container_index: int = 0  # LWS only: JSON 6902 addresses the container by index
    base_image: str = "lmsysorg/sglang"  # the image name as the base manifests spell it

    @property
    def api_kind(self) -> tuple[str, str]:
        return _API[self.kind], _KIND[self.kind]


def merge_args(current: list[str], serve: list[str]) -> list[str]:
    """Return `current` with each `--flag [value]` of `serve` set: an existing occurrence
    of the flag (and its value) is dropped, the serve pair appended."""

    def pairs(tokens: list[str]) -> list[list[str]]:
        out: list[list[str]] = []
        for token in tokens:
            if token.startswith("--") or not out:
                out.append([token])
            else:
                out[-1].append(token)
        return out

    flags = {p[0] for p in pairs(serve)}
    kept = [p for p in pairs(current) if p[0] not in flags]
    return [t for p in kept + pairs(serve) for t in p]


def kustomize_overlay(
    workload: Workload, image: str, digest: str, args: list[str], resources: list[str]
) -> dict[str, Any]:
    """Return the overlay's files: kustomization.yaml and its patch."""
    api, kind = workload.api_kind
    group, _, version = api.rpartition("/")
    target = {"group": group, "version": version, "kind": kind, "name": workload.name}
    patch: Any
    if workload.kind == "lws":
        ops = [
            {
                "op": "replace",
                "path": f"{t}/spec/containers/{workload.container_index}/args",
                "value": args,
            }
            for t in LWS_TEMPLATES
        ]
        patch_file, patch = "patch-args.json", list(ops)
    else:
        patch_file = "patch-args.yaml"
        patch = {
            "apiVersion": api,
            "kind": kind,
            "metadata": {"name": workload.name},
            "spec": {
                "template": {"spec": {"containers": [{"name": workload.container, "args": args}]}}
            },
        }
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "images": [{"name": workload.base_image, "newName": image, "digest": digest}],
        "patches": [{"path": patch_file, "target": target}],
    }
    return {"kustomization.yaml": kustomization, patch_file: patch}


def helm_values(image: str, digest: str, args: list[str]) -> dict[str, Any]:
    """Return the Helm values fragment (image pinned by digest, the serve flags)."""
    values = {"image": {"repository": image, "tag": "", "digest": digest}, "extraArgs": args}
    return {"values-ddtree.yaml": values}


def configmap_key(rel: str) -> str:
    """Return the ConfigMap key of a patchset path (`/` -> `__`; keys allow [-._a-zA-Z0-9])."""
    return _KEY_BAD.sub("_", rel.replace("/", "__"))


def _mount_patch(workload: Workload, volume: Doc, mounts: list[Doc]) -> Doc | list[Doc]:
    """The patch adding `volume`, an emptyDir bytecode cache, the mounts and the env."""
    env = [{"name": PYCACHE_ENV, "value": PYCACHE_DIR}]
    cache = {"name": CACHE_VOLUME, "emptyDir": {}}
    all_mounts = [*mounts, {"name": CACHE_VOLUME, "mountPath": PYCACHE_DIR}]
    api, kind = workload.api_kind
    if workload.kind == "lws":
        ops: list[Doc] = []
        for t in LWS_TEMPLATES:
            base = f"{t}/spec"
            ops += [{"op": "add", "path": f"{base}/volumes/-", "value": v} for v in (volume, cache)]
            where = f"{base}/containers/{workload.container_index}"
            ops += [
                {"op": "add", "path": f"{where}/volumeMounts/-", "value": m} for m in all_mounts
            ]
            ops += [{"op": "add", "path": f"{where}/env/-", "value": e} for e in env]
        return ops
    container = {"name": workload.container, "volumeMounts": all_mounts, "env": env}
    spec = {"volumes": [volume, cache], "containers": [container]}
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": workload.name},
        "spec": {"template": {"spec": spec}},
    }


def configmap_variant(
    workload: Workload, files: ResultFiles, deleted: tuple[str, ...], name: str
) -> dict[str, Any]:
    """Return the ConfigMap and the workload patch mounting each file with subPath; raises
    ConfigError over 1 MiB or when a file must be deleted."""
    refuse_deletions(deleted, "configmap")
    data = {}
    for rel, raw in sorted(files.files.items()):
        try:
            data[configmap_key(rel)] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"configmap: {rel} is not UTF-8 text; use image-volume or oci"
            ) from None
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise ConfigError(
            f"configmap: the files take {size} bytes, over the 1 MiB ({CONFIGMAP_MAX_BYTES}) "
            "a ConfigMap may hold: use image-volume or oci"
        )
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    mounts = [
        {
            "name": VOLUME,
            "mountPath": files.mount_path(rel),
            "subPath": configmap_key(rel),
            "readOnly": True,
        }
        for rel in sorted(files.files)
    ]
    volume = {"name": VOLUME, "configMap": {"name": name}}
    return {
        "configmap.yaml": configmap,
        "patch-mounts" + _suffix(workload): _mount_patch(workload, volume, mounts),
    }


def image_volume_variant(
    workload: Workload, files: ResultFiles, deleted: tuple[str, ...], reference: str
) -> dict[str, Any]:
    """Return the workload patch mounting the files image `reference` (KEP-4639) with one
    subPath mount per file; raises ConfigError when a file must be deleted."""
    refuse_deletions(deleted, "image-volume")
    mounts = [
        {"name": VOLUME, "mountPath": files.mount_path(rel), "subPath": rel, "readOnly": True}
        for rel in sorted(files.files)
    ]
    volume = {"name": VOLUME, "image": {"reference": reference, "pullPolicy": "IfNotPresent"}}
    return {"patch-mounts" + _suffix(workload): _mount_patch(workload, volume, mounts)}


def _suffix(workload: Workload) -> str:
    return ".json" if workload.kind == "lws" else ".yaml"


def variant_kustomization(workload: Workload, resources: list[str], patch_file: str) -> Doc:
    """Return a kustomization applying a mount variant's patch to the operator's resources."""
    api, kind = workload.api_kind
    group, _, version = api.rpartition("/")
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "patches": [
            {
                "path": patch_file,
                "target": {"group": group, "version": version, "kind": kind, "name": workload.name},
            }
        ],
    }
