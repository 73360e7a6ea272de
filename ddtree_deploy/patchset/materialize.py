"""Build each file's result from the pristine pinned wheel (for `lock` and `verify`)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.agent.host.pure import apply_unified_diff, sha256_bytes
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import Patchset
from ddtree_deploy.patchset.models import FileEntry, Target
from ddtree_deploy.patchset.sources import read_source

CACHE_ENV = "DDTREE_DEPLOY_CACHE"


@dataclass(frozen=True)
class Materialized:
    """One file as the patchset makes it: source bytes, base bytes (None if absent), result."""

    entry: FileEntry
    source: bytes
    base: bytes | None
    result: bytes


def cache_dir() -> Path:
    """Where downloads are kept: `$DDTREE_DEPLOY_CACHE`, else ~/.cache/ddtree-deploy."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ddtree-deploy")


def wheels_dir() -> Path:
    """Where the pristine target wheels are kept (`cache_dir()`/wheels)."""
    return cache_dir() / "wheels"


def _wheel_prefix(target: Target) -> str:
    return f"{target.package.replace('-', '_')}-{target.version}-"


def cached_wheel(target: Target) -> Path | None:
    """The target's wheel when the cache holds one, else None (nothing is downloaded)."""
    cached = sorted(wheels_dir().glob(_wheel_prefix(target) + "*.whl"))
    return cached[0] if cached else None


def fetch_wheel(target: Target) -> Path:
    """The target's wheel from the cache, downloaded once with `pip download --no-deps`
    (cli/wheels.py says so on stderr first).

    Any ABI's wheel will do: the .py files are identical across them.
    """
    cached_one = cached_wheel(target)
    if cached_one is not None:
        return cached_one
    wheels = wheels_dir()
    prefix = _wheel_prefix(target)
    wheels.mkdir(parents=True, exist_ok=True)
    spec = f"{target.package}=={target.version}"
    base_cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels)]
    attempts = [
        [*base_cmd, spec],
        [
            *base_cmd,
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--platform",
            "manylinux_2_34_x86_64",
            spec,
        ],
    ]
    errors = []
    for cmd in attempts:
        done = subprocess.run(cmd, capture_output=True, text=True)
        cached = sorted(wheels.glob(prefix + "*.whl"))
        if cached:
            return cached[0]
        errors.append(done.stderr.strip().splitlines()[-1:] or ["no output"])
    raise PatchsetError(f"cannot download {spec}: {errors[-1][0]}")


def check_diff_header(path_label: str, entry: FileEntry, diff: str) -> None:
    """A diff must touch exactly the file its entry names (--- a/PATH, +++ b/PATH)."""
    olds = [ln[4:].split("\t")[0].strip() for ln in diff.splitlines() if ln.startswith("--- ")]
    news = [ln[4:].split("\t")[0].strip() for ln in diff.splitlines() if ln.startswith("+++ ")]
    if len(olds) != 1 or len(news) != 1:
        raise PatchsetError(f"{path_label}: a diff must touch exactly one file")
    if olds[0] != f"a/{entry.path}" or news[0] != f"b/{entry.path}":
        raise PatchsetError(
            f"{path_label}: headers name {olds[0]!r}/{news[0]!r}, expected a/{entry.path}"
        )


def materialize(patchset: Patchset, wheel: Path) -> list[Materialized]:
    """Every file's result, built from the wheel's base bytes; raises PatchsetError."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for entry in patchset.spec.files:
            source = read_source(patchset, entry)
            base = zf.read(entry.path) if entry.path in names else None
            label = str(patchset.source_path(entry.source))
            if entry.kind == "new":
                result = source
            else:
                if base is None:
                    raise PatchsetError(f"{label}: {entry.path} does not exist in {wheel.name}")
                diff = source.decode()
                check_diff_header(label, entry, diff)
                try:
                    result = apply_unified_diff(base.decode("utf-8"), diff).encode("utf-8")
                except ValueError as exc:
                    raise PatchsetError(f"{label}: diff does not apply: {exc}") from None
            out.append(Materialized(entry=entry, source=source, base=base, result=result))
    return out


def compile_results(patchset: Patchset, files: list[Materialized]) -> None:
    """Byte-compile every .py result in memory (what py_compile checks); raises PatchsetError."""
    for item in files:
        if not item.entry.path.endswith(".py"):
            continue
        try:
            compile(item.result, item.entry.path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            raise PatchsetError(
                f"{patchset.root}: {item.entry.path} does not compile after patching: {exc}"
            ) from None


def digest(data: bytes) -> str:
    """Return the sha256 hex digest of `data`."""
    return sha256_bytes(data)
