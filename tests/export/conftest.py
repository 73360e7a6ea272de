"""Fixtures of the export tests: base images built once per session from the sandbox's
pristine sglang installs (tests/export/images.py says how)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.export import images

PATCHSETS = Path(__file__).resolve().parents[2] / "patchsets"
CASES = {  # sglang version -> the patchset exported onto it
    "0.5.13.post1": "ddtree@1.1.12",
    "0.5.23": "ddtree@2.1.2",
}


def patched_paths(ref: str) -> list[str]:
    """The patchset's `patch` files (modules the base already has, with bytecode)."""
    from ddtree_deploy.patchset import resolve_patchset

    spec = resolve_patchset(PATCHSETS, ref).spec
    return [f.path for f in spec.files if f.kind == "patch"]


@pytest.fixture(scope="session")
def sandbox_envs():
    """version -> the sandbox BaseEnv (pristine sglang + the python that imports it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (the editable image is imported in a private mount namespace)")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("needs the system python3 (pip/setuptools for the editable install)")
    from ddtree_sandbox import ensure_base_env

    return {version: ensure_base_env(version) for version in CASES}


@pytest.fixture(scope="session")
def scratch_root() -> Iterator[Path]:
    """A session dir in RAM (/dev/shm) when there is one: the images and their unpacked
    trees are hundreds of MB, written and read once; a loaded disk made that minutes."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and shutil.disk_usage(shm).free > 4 << 30 else None
    root = Path(tempfile.mkdtemp(prefix="ddtree-export-tests-", dir=parent))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scratch(scratch_root: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A fresh dir under scratch_root for one test, removed after it."""
    path = Path(tempfile.mkdtemp(prefix=request.node.name[:40] + "-", dir=scratch_root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def base_images(sandbox_envs, scratch_root: Path) -> dict[tuple[str, str], Path]:
    """(version, "site" | "editable") -> a base image on disk (OCI layout | docker save)."""
    out = {}
    for version, ref in CASES.items():
        pristine = sandbox_envs[version].sglang_dir
        patched = patched_paths(ref)
        work = scratch_root / f"base-{version}"
        work.mkdir()
        site = [images.site_layer(pristine, patched), images.top_layer()]
        out[(version, "site")] = images.write_oci_layout(site, work / "site-oci")
        edit = [images.editable_layer(pristine, patched, version, work), images.top_layer()]
        out[(version, "editable")] = images.write_docker_save(edit, work / "editable.tar")
    return out


RUNNABLE = [("0.5.13.post1", "site"), ("0.5.23", "editable")]  # the --verify cases


def runnable_mounts(env) -> list[str]:
    """The container's bind mounts for a runnable test image (images.venv_layer): the
    machine's interpreter (/usr, /lib, /lib64) and the sandbox's cache (deps), read-only."""
    return [
        "/usr:/usr:ro",
        "/usr/lib:/lib:ro",
        "/usr/lib64:/lib64:ro",
        f"{env.cache_dir}:{env.cache_dir}:ro",
    ]


@pytest.fixture(scope="session")
def runnable_images(sandbox_envs, scratch_root: Path) -> dict[tuple[str, str], Path]:
    """(version, layout) of RUNNABLE -> a base image that a container can run: the base's
    sglang layer, then images.venv_layer (python at /opt/venv/bin/python3, with the sandbox's
    CPU adapter, off unless its variable is set: a server of the image can run on this
    CPU), then the top."""
    from ddtree_sandbox.cpu_adapt import install_cpu_adapt

    adapter = scratch_root / "cpu-adapt"
    adapter.mkdir()
    install_cpu_adapt(adapter)
    site_files = {p.name: p.read_bytes() for p in adapter.iterdir()}
    out = {}
    for version, layout in RUNNABLE:
        env = sandbox_envs[version]
        pristine, patched = env.sglang_dir, patched_paths(CASES[version])
        work = scratch_root / f"runnable-{version}"
        work.mkdir()
        deps = [str(p) for p in (env.overlay_dir, env.site_packages) if p is not None]
        if layout == "site":
            first = images.site_layer(pristine, patched)
        else:
            first = images.editable_layer(pristine, patched, version, work)
        layers = [first, images.venv_layer(deps, site_files), images.top_layer()]
        if layout == "site":
            out[(version, layout)] = images.write_oci_layout(layers, work / "site-oci")
        else:
            out[(version, layout)] = images.write_docker_save(layers, work / "editable.tar")
    return out
