"""Offline checks of the Kubernetes files an export writes (pure; no API server runs here).

Not a full OpenAPI validation (no schema package fits offline without shipping the
Kubernetes schemas): the structure each artifact relies on: apiVersion/kind/metadata.name,
DNS-1123 names, ConfigMap keys and size, every volumeMount naming a volume of the patch,
absolute mount paths and relative subPaths without `..`, kustomization fields and patch
files present, JSON 6902 ops well formed. Returns the problems as strings.
"""

from __future__ import annotations

import re
from typing import Any

from ddtree_deploy.export.k8s import CONFIGMAP_MAX_BYTES

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_OPS = {"add", "remove", "replace", "move", "copy", "test"}


def check_files(files: dict[str, Any]) -> list[str]:
    """Return every problem found in a set of written files (name -> document)."""
    problems: list[str] = []
    for name, doc in sorted(files.items()):
        if isinstance(doc, list):
            problems += [f"{name}: {p}" for p in _check_ops(doc)]
        elif isinstance(doc, dict) and doc.get("kind") == "Kustomization":
            problems += [f"{name}: {p}" for p in _check_kustomization(doc, files)]
        elif isinstance(doc, dict) and "kind" in doc:
            problems += [f"{name}: {p}" for p in _check_object(doc)]
    return problems


def _check_object(doc: dict[str, Any]) -> list[str]:
    out = []
    if not doc.get("apiVersion"):
        out.append("no apiVersion")
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not _DNS1123.match(name) or len(name) > 253:
        out.append(f"metadata.name {name!r} is not a DNS-1123 name")
    if doc["kind"] == "ConfigMap":
        data = doc.get("data") or {}
        out += [
            f"ConfigMap key {k!r} has characters outside [-._a-zA-Z0-9]"
            for k in data
            if not _KEY.match(k)
        ]
        size = sum(len(k) + len(str(v).encode()) for k, v in data.items())
        if size > CONFIGMAP_MAX_BYTES:
            out.append(f"ConfigMap holds {size} bytes, over {CONFIGMAP_MAX_BYTES}")
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec")
    if isinstance(pod, dict):
        out += _check_pod(pod)
    return out


def _check_pod(pod: dict[str, Any]) -> list[str]:
    out = []
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    for container in pod.get("containers") or []:
        if not container.get("name"):
            out.append("a container without a name")
        for arg in container.get("args") or []:
            if not isinstance(arg, str):
                out.append(f"container {container.get('name')}: arg {arg!r} is not a string")
        for mount in container.get("volumeMounts") or []:
            out += _check_mount(mount, volumes)
    return out


def _check_mount(mount: dict[str, Any], volumes: set[Any]) -> list[str]:
    out = []
    if volumes and mount.get("name") not in volumes:
        out.append(f"volumeMount {mount.get('name')!r} names no volume of the patch")
    if not str(mount.get("mountPath", "")).startswith("/"):
        out.append(f"mountPath {mount.get('mountPath')!r} is not absolute")
    sub = mount.get("subPath")
    if sub is not None and (sub.startswith("/") or ".." in sub.split("/")):
        out.append(f"subPath {sub!r} is absolute or holds '..'")
    return out


def _check_ops(ops: list[Any]) -> list[str]:
    out = []
    for op in ops:
        if (
            not isinstance(op, dict)
            or op.get("op") not in _OPS
            or not str(op.get("path", "")).startswith("/")
        ):
            out.append(f"not a JSON 6902 operation: {op!r}")
        elif op["op"] in ("add", "replace", "test") and "value" not in op:
            out.append(f"{op['op']} {op['path']} has no value")
    return out


def _check_kustomization(doc: dict[str, Any], files: dict[str, Any]) -> list[str]:
    out = []
    if not doc.get("resources"):
        out.append("no resources")
    for image in doc.get("images") or []:
        if not image.get("name") or not _DIGEST.match(str(image.get("digest", ""))):
            out.append(f"images entry {image!r} lacks a name or a sha256 digest")
    for patch in doc.get("patches") or []:
        if patch.get("path") not in files:
            out.append(f"patch file {patch.get('path')!r} is not written")
        if not (patch.get("target") or {}).get("kind"):
            out.append(f"patch {patch.get('path')!r} has no target kind")
    return out
