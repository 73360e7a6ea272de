"""Test side: base images built from the sandbox's real sglang installs, and an unpacker.

Nothing here comes from the product's export code: the base images are written with plain
tarfile, and `unpack_image` applies layers the way overlayfs/Docker do (a `.wh.NAME` removes
NAME from the layers below, `.wh..wh..opq` empties its folder), so the tests judge the
product by an independent reader.

Base images (both hold the real pristine sglang tree of the sandbox, all of it):
- site-packages: a wheel install at /opt/venv/lib/python3.11/site-packages, written as an OCI
  layout with gzipped layers;
- editable: the tree at /sgl-workspace/sglang/python (as in the official lmsysorg/sglang
  image) and, in site-packages, what the machine's own pip 23 + setuptools 66 write for
  `pip install -e` (dist-info with direct_url.json, a .pth, the __editable__ finder), as a
  legacy `docker save` tarball. pip ran against a tiny copy of the project in a temp dir;
  the three files it wrote name that dir, and are rewritten to /sgl-workspace/sglang/python,
  where the image holds the tree.

The base's bytecode of the modules a patchset patches is compiled `unchecked-hash` (as images
built for reproducibility do, e.g. `compileall --invalidation-mode unchecked-hash`): Python
then loads such a .pyc without looking at its source, so a stale one left in the image
would run the old code. That is what the whiteouts must prevent.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import py_compile
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

SITE = "opt/venv/lib/python3.11/site-packages"
WORKSPACE = "sgl-workspace/sglang/python"
SYSTEM_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
CONFIG_CMD = {
    "Entrypoint": ["python3", "-m", "sglang.launch_server"],
    "Cmd": ["--host", "0.0.0.0"],
    "Env": ["PATH=/opt/venv/bin:/usr/bin", "PYTHONUNBUFFERED=1"],
    "WorkingDir": "/sgl-workspace",
}


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _unchecked_pyc(source: Path) -> bytes:
    """Return the bytecode of `source` compiled unchecked-hash."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x.pyc"
        py_compile.compile(
            str(source),
            cfile=str(out),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return out.read_bytes()


def _tar_tree(tar: tarfile.TarFile, src: Path, prefix: str, replace: dict[str, bytes]) -> None:
    """Add `src` under `prefix` (files 0644 root, dirs 0755), `replace` overriding bytes."""
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(folder, src)
        base = prefix if rel == "." else posixpath.join(prefix, rel)
        info = tarfile.TarInfo(base + "/")
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
        tar.addfile(info)
        for name in sorted(files):
            path = posixpath.join(base, name)
            data = replace.get(path)
            if data is None:
                data = (Path(folder) / name).read_bytes()
            _add_bytes(tar, path, data)


def _add_bytes(tar: tarfile.TarFile, path: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(path)
    info.size, info.mode, info.mtime = len(data), mode, 1_700_000_000
    info.uid, info.gid, info.uname, info.gname = 1000, 1000, "sgl", "sgl"
    tar.addfile(info, io.BytesIO(data))


def stale_pycs(pristine: Path, patched: list[str], prefix: str) -> dict[str, bytes]:
    """Return in-image path -> unchecked-hash bytecode for each patched module's .pyc."""
    out = {}
    for rel in patched:
        source = pristine / rel
        cache = posixpath.join(prefix, posixpath.dirname(rel), "__pycache__")
        stem = Path(rel).stem
        out[posixpath.join(cache, f"{stem}.cpython-311.pyc")] = _unchecked_pyc(source)
    return out


def site_layer(pristine: Path, patched: list[str]) -> bytes:
    """Return a tar layer of a wheel install of the pristine sglang under SITE."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        _tar_tree(tar, pristine, SITE, stale_pycs(pristine, patched, SITE))
    return raw.getvalue()


def pip_editable_files(version: str, work: Path) -> dict[str, bytes]:
    """Return site-packages name -> bytes of what real `pip install -e` writes for a project
    `sglang==version` at /WORKSPACE (see the module docstring)."""
    project = work / "project"
    (project / "sglang").mkdir(parents=True)
    (project / "sglang" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "sglang"\nversion = "{version}"\n'
        '[tool.setuptools.packages.find]\ninclude = ["sglang*"]\n'
    )
    target = work / "site"
    env = {**os.environ, "PYTHONPATH": SYSTEM_DIST_PACKAGES, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    cmd = ["/usr/bin/python3", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    cmd += ["--no-index", "--target", str(target), "-e", str(project)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = {}
    for path in sorted(p for p in target.rglob("*") if p.is_file()):
        rel = path.relative_to(target).as_posix()
        if rel.endswith((".pyc",)) or rel.startswith("bin/"):
            continue
        data = path.read_bytes()
        if rel.endswith(("direct_url.json", ".pth", "_finder.py")):
            data = data.replace(str(project).encode(), b"/" + WORKSPACE.encode())
        out[rel] = data
    return out


def editable_layer(pristine: Path, patched: list[str], version: str, work: Path) -> bytes:
    """Return a tar layer of the pristine tree at WORKSPACE plus pip's editable metadata."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        _tar_tree(
            tar,
            pristine / "sglang",
            f"{WORKSPACE}/sglang",
            stale_pycs(pristine, patched, WORKSPACE),
        )
        for rel, data in pip_editable_files(version, work).items():
            _add_bytes(tar, posixpath.join(SITE, rel), data)
    return raw.getvalue()


def top_layer() -> bytes:
    """A second layer: a file and a whiteout (of a path the first layer does not hold)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        _add_bytes(tar, "etc/image-note", b"built by tests/export/images.py\n")
        _add_bytes(tar, "etc/.wh.nothing-here", b"", 0)
    return raw.getvalue()


def venv_layer(deps: list[str], site_files: dict[str, bytes] | None = None) -> bytes:
    """Return a layer that makes the image RUNNABLE by `/opt/venv/bin/python3`: a venv
    (pyvenv.cfg, python3 -> /usr/bin/python3) over SITE, whose site-packages gain the
    sandbox's dependency dirs `deps` (torch and the rest; mounted into the container at the
    same paths) by a .pth, read after the image's own sglang; plus /tmp and a passwd.
    `site_files`: more files for site-packages (name -> bytes: the sandbox's CPU adapter).

    The interpreter and the dependencies are the machine's, bind-mounted read-only (an
    image holding torch would be GBs); sglang, its editable finder and the patch layer are
    the image's own, which is what a gate inside the container judges.
    """
    raw = io.BytesIO()
    venv = posixpath.dirname(posixpath.dirname(posixpath.dirname(SITE)))  # opt/venv
    with tarfile.open(fileobj=raw, mode="w") as tar:
        cfg = "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n"
        _add_bytes(tar, f"{venv}/pyvenv.cfg", cfg.encode())
        link = tarfile.TarInfo(f"{venv}/bin/python3")
        link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "/usr/bin/python3", 1_700_000_000
        tar.addfile(link)
        _add_bytes(tar, f"{SITE}/zz-sandbox-deps.pth", "".join(d + "\n" for d in deps).encode())
        for name, data in sorted((site_files or {}).items()):
            _add_bytes(tar, f"{SITE}/{name}", data)
        tmp = tarfile.TarInfo("tmp/")
        tmp.type, tmp.mode, tmp.mtime = tarfile.DIRTYPE, 0o1777, 1_700_000_000
        tar.addfile(tmp)
        _add_bytes(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        _add_bytes(tar, "etc/group", b"root:x:0:\n")
    return raw.getvalue()


def image_config(diff_ids: list[str]) -> bytes:
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "2026-01-01T00:00:00Z",
        "config": {**CONFIG_CMD, "Labels": {"org.example.base": "yes"}},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "tests/export/images.py"}] * len(diff_ids),
    }
    return json.dumps(config, sort_keys=True).encode()


def write_oci_layout(layers: list[bytes], out: Path) -> Path:
    """Write an OCI layout of `layers` (gzipped, level 1) at `out`; returns `out`."""
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    descriptors, diff_ids = [], []
    for layer in layers:
        packed = gzip.compress(layer, compresslevel=1, mtime=0)
        (blobs / _digest(packed)[7:]).write_bytes(packed)
        descriptors.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": _digest(packed),
                "size": len(packed),
            }
        )
        diff_ids.append(_digest(layer))
    config = image_config(diff_ids)
    (blobs / _digest(config)[7:]).write_bytes(config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": descriptors,
        }
    ).encode()
    (blobs / _digest(manifest)[7:]).write_bytes(manifest)
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": _digest(manifest),
                "size": len(manifest),
            }
        ],
    }
    (out / "index.json").write_text(json.dumps(index))
    return out


def write_docker_save(layers: list[bytes], out: Path) -> Path:
    """Write a legacy `docker save` tarball of `layers` (uncompressed) at `out`."""
    config = image_config([_digest(layer) for layer in layers])
    with tarfile.open(out, "w") as tar:
        names = []
        for number, layer in enumerate(layers):
            name = f"layer{number}/layer.tar"
            info = tarfile.TarInfo(name)
            info.size = len(layer)
            tar.addfile(info, io.BytesIO(layer))
            names.append(name)
        cfg = tarfile.TarInfo(_digest(config)[7:] + ".json")
        cfg.size = len(config)
        tar.addfile(cfg, io.BytesIO(config))
        manifest = json.dumps(
            [{"Config": cfg.name, "RepoTags": ["base:test"], "Layers": names}]
        ).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return out


def _layers_of(layout: Path) -> list[tuple[str, bytes]]:
    """Return (digest, uncompressed tar) of each layer of the layout's one image, in order."""
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"]
    manifest = json.loads((layout / "blobs" / "sha256" / digest[7:]).read_bytes())
    out = []
    for desc in manifest["layers"]:
        data = (layout / "blobs" / "sha256" / desc["digest"][7:]).read_bytes()
        out.append((desc["digest"], gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data))
    return out


def unpack_image(
    layout: Path, root: Path, whiteouts: bool = True, cache: Path | None = None
) -> Path:
    """Apply the layout's layers in order under `root`, as overlayfs/Docker do; with
    `whiteouts=False` the markers are skipped (the negative control). Returns root.

    cache: a dir where the tree of all layers but the top one is kept, keyed by their
    digests (the base's layers, identical in every export of one base): later calls
    hard-link that tree (`cp -al`) and apply only the top layer. Writes replace a file
    (unlink, then write), so a hard-linked cached file is never changed.
    """
    layers = _layers_of(layout)
    if cache is None:
        root.mkdir(parents=True, exist_ok=True)
        for _, layer in layers:
            _apply_layer(layer, root, whiteouts)
        return root
    key = hashlib.sha256(repr((whiteouts, [d for d, _ in layers[:-1]])).encode()).hexdigest()[:16]
    lower = cache / key
    if not lower.is_dir():
        building = cache / f".{key}.partial"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for _, layer in layers[:-1]:
            _apply_layer(layer, building, whiteouts)
        building.rename(lower)
    subprocess.run(["cp", "-al", str(lower), str(root)], check=True)
    _apply_layer(layers[-1][1], root, whiteouts)
    return root


def _apply_layer(layer: bytes, root: Path, whiteouts: bool) -> None:
    """Apply one uncompressed layer tar under root: its whiteouts first (they hide what the
    layers below hold), then its entries."""
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = tar.getmembers()
        for info in members:
            folder, name = posixpath.split(posixpath.normpath(info.name))
            if not name.startswith(".wh.") or not whiteouts:
                continue
            target = root / folder / name[len(".wh.") :]
            if name == ".wh..wh..opq":
                for child in (root / folder).iterdir():
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            elif target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        for info in members:
            if posixpath.basename(posixpath.normpath(info.name)).startswith(".wh."):
                continue
            dest = root / posixpath.normpath(info.name)
            if info.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            elif info.isreg():
                dest.parent.mkdir(parents=True, exist_ok=True)
                stream = tar.extractfile(info)
                assert stream is not None
                if dest.exists():
                    dest.unlink()
                dest.write_bytes(stream.read())
