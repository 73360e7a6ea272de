"""Build and cache the sandbox's shared Python env and its pristine sglang installs.

Layout under the cache dir (``$DDTREE_SANDBOX_CACHE``, default ``/opt/ddtree-sandbox``):

- ``wheelhouse/``: every wheel downloaded once (``pip download --no-deps``).
- ``base-<hash12>/``: a venv made from ``/usr/bin/python3`` holding torch (CPU), the packages
  sglang needs to import, and a torchvision TEST STAND-IN. sglang itself is NOT in it.
- ``sglang-<version>/``: a pristine ``pip install --target`` of that sglang (``sglang/``, its
  dist-info, ``tools/``), byte-compiled, for hosts to ``cp -a``.
- ``overlay-<hash12>/``: for an sglang whose requirement list starts with ``-r OTHER.txt``,
  the base env is the one OTHER.txt builds (shared, unchanged) and the list's own pins are
  ``pip install --target``-ed here; hosts put it on sys.path ahead of the base env.

Each entry is built in a ``.tmp-*`` dir and renamed into place once complete, then gets a
``ready`` JSON marker with timings. One flock serialises builders across processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from ddtree_sandbox.torchvision_standin import (
    digest_torchvision_standin,
    write_torchvision_standin,
)

DEFAULT_CACHE_DIR = Path("/opt/ddtree-sandbox")
DEFAULT_SGLANG_VERSION = "0.5.13.post1"
SYSTEM_PYTHON = Path("/usr/bin/python3")
TORCH_SPEC = "torch==2.13.0"
LOCAL_WHEELS_DIR = Path("/opt/wheels")
READY_MARKER = "ready"


@dataclass(frozen=True)
class BaseEnv:
    """A built base env plus the pristine sglang install for one version."""

    key: str
    root: Path
    python: Path
    site_packages: Path
    sglang_version: str
    sglang_dir: Path
    cache_dir: Path
    wheelhouse: Path
    overlay_dir: Path | None = None  # extra packages this sglang needs on top of the base


def resolve_cache_dir(cache_dir: Path | None = None) -> Path:
    """Return the cache dir: the argument, else ``$DDTREE_SANDBOX_CACHE``, else the default."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("DDTREE_SANDBOX_CACHE") or DEFAULT_CACHE_DIR)


def requirements_path(sglang_version: str) -> Path:
    """Return the packaged requirement list for ``sglang_version``; raise if there is none."""
    path = Path(__file__).with_name(f"requirements-sglang-{sglang_version}.txt")
    if not path.is_file():
        raise FileNotFoundError(f"no sandbox requirement list for sglang {sglang_version}: {path}")
    return path


def read_requirement_pins(text: str) -> list[tuple[str, str]]:
    """Return ``(PEP 503 name, version)`` for each ``name==version`` line in ``text``; raise
    ValueError for any other requirement."""
    pins = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        not_pinned = ValueError(f"sandbox requirements must be exact pins, got {line!r}")
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            raise not_pinned from None
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
            raise not_pinned
        pins.append((canonicalize_name(requirement.name), specifiers[0].version))
    return pins


def split_base_requirements(text: str) -> tuple[str | None, str]:
    """Return (file named by a leading ``-r FILE`` line or None, the rest of ``text``).

    A list that starts with ``-r requirements-sglang-X.txt`` means: the base env of that
    list, plus these pins in a version-specific overlay.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        if stripped.startswith("-r "):
            return stripped[3:].strip(), "\n".join(lines[:i] + lines[i + 1 :]) + "\n"
        break
    return None, text


def compute_base_key(
    requirements_text: str, torch_spec: str, python_version: str, standin_digest: str
) -> str:
    """Return the 12-hex-digit cache key for a base env built from these inputs."""
    digest = hashlib.sha256()
    for part in (requirements_text.strip(), torch_spec, python_version.strip(), standin_digest):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def ensure_base_env(
    sglang_version: str = DEFAULT_SGLANG_VERSION, cache_dir: Path | None = None
) -> BaseEnv:
    """Return the base env and pristine sglang for ``sglang_version``, building what is missing.

    Cold builds download from the package index (about a minute); later calls only check the
    ``ready`` markers. Raises ``subprocess.CalledProcessError`` when pip fails.
    """
    cache_dir = resolve_cache_dir(cache_dir)
    requirements_file = requirements_path(sglang_version)
    base_file, overlay_text = split_base_requirements(requirements_file.read_text())
    requirements_text = (
        requirements_file.with_name(base_file).read_text() if base_file else overlay_text
    )
    python_version = _run_capture([str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version)"])
    key = compute_base_key(
        requirements_text, TORCH_SPEC, python_version, digest_torchvision_standin()
    )
    overlay_dir = None
    if base_file and read_requirement_pins(overlay_text):  # a bare `-r` list: no overlay
        overlay_key = compute_base_key(overlay_text, key, python_version, "overlay")
        overlay_dir = cache_dir / f"overlay-{overlay_key}"
    base_root = cache_dir / f"base-{key}"
    sglang_dir = cache_dir / f"sglang-{sglang_version}"
    env = BaseEnv(
        key=key,
        root=base_root,
        python=base_root / "bin" / "python",
        site_packages=base_root / "lib" / "python3.11" / "site-packages",
        sglang_version=sglang_version,
        sglang_dir=sglang_dir,
        cache_dir=cache_dir,
        wheelhouse=cache_dir / "wheelhouse",
        overlay_dir=overlay_dir,
    )
    wanted = [base_root, sglang_dir, *([overlay_dir] if overlay_dir else [])]
    if all(_is_ready(path) for path in wanted):
        return env
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _build_lock(cache_dir):
        _remove_stale_temps(cache_dir)
        if not _is_ready(base_root):
            _build_base(env, requirements_text)
        if overlay_dir and not _is_ready(overlay_dir):
            _build_overlay(env, overlay_dir, overlay_text)
        if not _is_ready(sglang_dir):
            _build_sglang(env)
    return env


def _build_overlay(env: BaseEnv, overlay_dir: Path, requirements_text: str) -> None:
    """``pip install --target`` the overlay's pins (from the wheelhouse) into ``overlay_dir``."""
    started = time.monotonic()
    pins = read_requirement_pins(requirements_text)
    with _temp_build_dir(env.cache_dir, overlay_dir) as tmp_dir:
        _download_missing(env.wheelhouse, pins, None)
        cmd = [*_pip_command(), "install", "--no-deps", "--no-index"]
        cmd += ["--find-links", str(env.wheelhouse), "--target", str(tmp_dir)]
        _run_quiet([*cmd, *(f"{name}=={version}" for name, version in pins)])
        timings_s = {"total_s": time.monotonic() - started}
        _write_ready(
            tmp_dir,
            {"kind": "overlay", "base": env.key, "pins": [f"{n}=={v}" for n, v in pins],
             "timings_s": timings_s},
        )  # fmt: skip


def _build_base(env: BaseEnv, requirements_text: str) -> None:
    timings_s: dict[str, float] = {}
    started = time.monotonic()
    with _temp_build_dir(env.cache_dir, env.root) as tmp_root:
        reqs_file = tmp_root.parent / f"{tmp_root.name}.reqs.txt"
        reqs_file.write_text(requirements_text)
        try:
            _download_missing(env.wheelhouse, read_requirement_pins(requirements_text), reqs_file)
            timings_s["download_s"] = time.monotonic() - started
            mark = time.monotonic()
            _run_quiet([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(tmp_root)])
            tmp_python = tmp_root / "bin" / "python"
            _pip_install(tmp_python, ["--find-links", str(LOCAL_WHEELS_DIR), TORCH_SPEC])
            timings_s["torch_s"] = time.monotonic() - mark
            mark = time.monotonic()
            _pip_install(tmp_python, ["--find-links", str(env.wheelhouse), "-r", str(reqs_file)])
            timings_s["packages_s"] = time.monotonic() - mark
        finally:
            reqs_file.unlink(missing_ok=True)
        write_torchvision_standin(tmp_root / "lib" / "python3.11" / "site-packages")
        timings_s["total_s"] = time.monotonic() - started
        _write_ready(tmp_root, {"kind": "base", "key": env.key, "timings_s": timings_s})


def _build_sglang(env: BaseEnv) -> None:
    started = time.monotonic()
    spec = f"sglang=={env.sglang_version}"
    with _temp_build_dir(env.cache_dir, env.sglang_dir) as tmp_dir:
        _download_missing(env.wheelhouse, [("sglang", env.sglang_version)], None)
        cmd = [*_pip_command(), "install", "--no-deps", "--no-index"]
        cmd += ["--find-links", str(env.wheelhouse), "--target", str(tmp_dir), spec]
        _run_quiet(cmd)
        install_s = time.monotonic() - started
        # Import costs 1.6 s more per process without .pyc; PYTHONDONTWRITEBYTECODE is set here.
        compile_cmd = [str(SYSTEM_PYTHON), "-m", "compileall", "-q", "-j", "0", str(tmp_dir)]
        _run_quiet(compile_cmd)
        timings_s = {"install_s": install_s, "total_s": time.monotonic() - started}
        _write_ready(
            tmp_dir, {"kind": "sglang", "version": env.sglang_version, "timings_s": timings_s}
        )


def _download_missing(
    wheelhouse: Path, pins: list[tuple[str, str]], reqs_file: Path | None
) -> None:
    """Download into ``wheelhouse`` the pinned wheels it lacks, via a temp dir then rename."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    present = {_parse_dist_filename(p.name) for p in wheelhouse.iterdir()}
    missing = [(name, version) for name, version in pins if (name, Version(version)) not in present]
    if not missing:
        return
    incoming = wheelhouse.parent / f".tmp-wheelhouse-{os.getpid()}"
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir()
    try:
        specs = [f"{name}=={version}" for name, version in missing]
        cmd = [*_pip_command(), "download", "--no-deps", "-d", str(incoming), *specs]
        _run_quiet(cmd)
        for path in incoming.iterdir():
            os.replace(path, wheelhouse / path.name)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


def _parse_dist_filename(filename: str) -> tuple[str, Version | None]:
    """Return (PEP 503 name, version) of a wheel or sdist file name; ("", None) for others."""
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[:2]
        if filename.endswith((".tar.gz", ".zip")):
            return parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename):
        pass
    return ("", None)


def _pip_install(target_python: Path, args: list[str]) -> None:
    cmd = [*_pip_command(), "--python", str(target_python), "install", "--no-deps", "--no-index"]
    _run_quiet([*cmd, *args])


def _pip_command() -> list[str]:
    """Return the pip to drive builds with: this interpreter's, else the system one."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    python = sys.executable if probe.returncode == 0 else str(SYSTEM_PYTHON)
    return [python, "-m", "pip", "--disable-pip-version-check"]


class SandboxBuildError(RuntimeError):
    """A build command failed; the message holds the command and the tail of its output."""


def _run_quiet(cmd: list[str]) -> None:
    """Run ``cmd`` with output captured; raise SandboxBuildError with its tail on failure."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise SandboxBuildError(f"exit {proc.returncode}: {' '.join(cmd)}\n{tail}")


def _run_capture(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _is_ready(path: Path) -> bool:
    return (path / READY_MARKER).is_file()


def _write_ready(path: Path, payload: dict[str, object]) -> None:
    payload = {**payload, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (path / READY_MARKER).write_text(json.dumps(payload, indent=2) + "\n")


@contextmanager
def _build_lock(cache_dir: Path) -> Iterator[None]:
    with open(cache_dir / ".build.lock", "a+") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


@contextmanager
def _temp_build_dir(cache_dir: Path, final: Path) -> Iterator[Path]:
    """Yield a fresh temp dir; rename it to ``final`` on success, delete it on failure."""
    tmp = cache_dir / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_temps(cache_dir: Path) -> None:
    """Delete leftovers of crashed builds; safe because the caller holds the build lock."""
    for path in cache_dir.glob(".tmp-*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
