"""Find patchsets on disk and load them with their lock; every error names the file."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.models import (
    NAME_PATTERN,
    VERSION_PATTERN,
    PatchsetLock,
    PatchsetSpec,
)

ENV_VAR = "DDTREE_DEPLOY_PATCHSETS"
PROJECT_NAME = "ddtree-deploy"  # the checkout whose patchsets/ is found from the cwd
LOCK_NAME = "patchset.lock.json"
SPEC_NAME = "patchset.toml"


@dataclass(frozen=True)
class Patchset:
    """A patchset directory: its spec, its lock (if written), where it lives, and the parsed
    patchset.toml the spec was read from (`spec_data`, which the lock pins)."""

    root: Path
    spec: PatchsetSpec
    lock: PatchsetLock | None
    spec_data: Mapping[str, Any] = field(compare=False, repr=False)

    @property
    def ref(self) -> str:
        return self.spec.ref

    def source_path(self, rel: str) -> Path:
        return self.root / rel

    def require_lock(self) -> PatchsetLock:
        if self.lock is None:
            raise PatchsetError(
                f"{self.root / LOCK_NAME}: missing; run `ddtree-deploy patchset lock {self.ref}`"
            )
        return self.lock


def new_version_hint(ref: str) -> str:
    """Return the advice every drift error ends with: a locked version never changes."""
    return (
        f"{ref} is locked and a locked version never changes: put the change in a new "
        "version (`ddtree-deploy patchset new NAME@VERSION --like "
        f"{ref} ...` or `ddtree-deploy patchset port {ref} ...`); only a version that was "
        f"never pushed may be re-locked, with `ddtree-deploy patchset lock --force {ref}`"
    )


def default_patchsets_dir(cwd: Path | None = None) -> Path:
    """Return where patchsets live when ``--patchsets-dir`` is not given.

    ``$DDTREE_DEPLOY_PATCHSETS``, else the ``patchsets/`` of the ddtree-deploy checkout
    holding ``cwd`` (default: the current directory) or one of its parents. Raises
    PatchsetError naming all three ways when neither is there.
    """
    if os.environ.get(ENV_VAR):
        given = Path(os.environ[ENV_VAR])
        if not given.is_dir():
            raise PatchsetError(f"${ENV_VAR}={given}: no such directory")
        return given
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "patchsets").is_dir() and _names_this_project(folder / "pyproject.toml"):
            return folder / "patchsets"
    raise PatchsetError(
        f"no patchsets directory: pass --patchsets-dir DIR, set ${ENV_VAR}, or run inside a "
        f"ddtree-deploy checkout (a folder with patchsets/ and a pyproject.toml naming "
        f"{PROJECT_NAME}; looked upward from {start})"
    )


def _names_this_project(pyproject: Path) -> bool:
    """Return whether ``pyproject`` exists and its [project] name is ddtree-deploy."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    name: object = data.get("project", {}).get("name")
    return name == PROJECT_NAME


def version_key(version: str) -> Version:
    """Return the PEP 440 sort key of a patchset version (1.0.0-rc1 < 1.0.0 < 1.0.0+hotfix)."""
    return Version(version)


def list_patchsets(base: Path) -> list[Patchset]:
    """Every patchset under base/NAME/VERSION, sorted by name then version; raises
    PatchsetError when ``base`` is not a directory (a typo must not read as "none")."""
    if not base.is_dir():
        raise PatchsetError(f"{base}: patchsets directory not found")
    found = [load_patchset(spec.parent) for spec in sorted(base.glob(f"*/*/{SPEC_NAME}"))]
    return sorted(found, key=lambda p: (p.spec.name, version_key(p.spec.version)))


def parse_ref(ref: str) -> tuple[str, str | None]:
    """Split `NAME@VERSION` (or `NAME`) into its name and version (None: not given), each
    matched whole against what a patchset's spec allows (models.NAME_PATTERN,
    VERSION_PATTERN): a ref names a patchset and never a path (`ddtree@../x` is refused, not
    followed). Raises PatchsetError naming the ref: an empty name, an `@` with no version
    after it, or a name or version that is not one."""
    name, at, version = ref.partition("@")
    if not name or (at and not version):
        raise PatchsetError(f"patchset {ref!r}: give NAME@VERSION, or NAME for its highest version")
    if not re.fullmatch(NAME_PATTERN, name):
        raise PatchsetError(
            f"patchset {ref!r}: {name!r} is not a patchset name (lowercase letters, digits, "
            "'-' and '_'); give NAME or NAME@VERSION, e.g. ddtree@1.0.0"
        )
    if version and not re.fullmatch(VERSION_PATTERN, version) and not _is_token(version):
        raise PatchsetError(
            f"patchset {ref!r}: {version!r} is not a version (like 1.0.0 or 1.0.0-rc1); "
            "give NAME or NAME@VERSION, e.g. ddtree@1.0.0"
        )
    return name, version or None


def _is_token(version: str) -> bool:
    """True for a version that is no path (letters, digits, '.', '+', '-', no '..'): one
    that is not released, such as `9`, is then refused listing those that are."""
    return re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+\-]*", version) is not None and ".." not in version


def resolve_patchset(base: Path, ref: str) -> Patchset:
    """`name@version`, or `name` for its highest version; raises PatchsetError for a ref
    that is not one (parse_ref) or names no patchset under `base`, naming the versions (or
    names) that exist."""
    name, version = parse_ref(ref)
    if version:
        root = base / name / version
        if not (root / SPEC_NAME).is_file():
            raise PatchsetError(
                f"{root / SPEC_NAME}: patchset {ref!r} not found; {known(base, name)}"
            )
        return load_patchset(root)
    candidates = [p for p in list_patchsets(base) if p.spec.name == name]
    if not candidates:
        raise PatchsetError(f"{base}: no patchset named {name!r}; {known(base, name)}")
    return candidates[-1]


def known(base: Path, name: str) -> str:
    """Say which versions of ``name`` exist under ``base`` (by folder, oldest first), or
    which names do, for an error message."""
    folders = [spec.parent for spec in (base / name).glob(f"*/{SPEC_NAME}")]
    versions = sorted((f.name for f in folders if _is_version(f.name)), key=version_key)
    if versions:
        return f"{name} has {', '.join(versions)}"
    names = sorted({spec.parent.parent.name for spec in base.glob(f"*/*/{SPEC_NAME}")})
    return f"patchsets here: {', '.join(names)}" if names else f"{base} holds no patchset"


def _is_version(text: str) -> bool:
    try:
        version_key(text)
    except InvalidVersion:
        return False
    return True


def load_patchset(root: Path) -> Patchset:
    """Load patchset.toml (+ lock); raise PatchsetError naming the file and key."""
    spec_path = root / SPEC_NAME
    try:
        text = spec_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchsetError(f"{spec_path}: not found") from None
    except UnicodeDecodeError as exc:
        raise PatchsetError(f"{spec_path}: cannot parse: {exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PatchsetError(f"{spec_path}: cannot parse: {exc}") from None
    spec = parse_patchset(raw, spec_path)
    return Patchset(root=root, spec=spec, lock=_load_lock(root / LOCK_NAME), spec_data=raw)


def parse_patchset(raw: dict[str, Any], spec_path: Path) -> PatchsetSpec:
    """Return the spec in ``raw`` (parsed patchset.toml found at ``spec_path``); no I/O.

    Raises PatchsetError naming ``spec_path`` and the bad key, or the NAME/VERSION folder
    the spec should live in when it lives elsewhere.
    """
    try:
        spec = PatchsetSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise PatchsetError(f"{spec_path}: key {key!r}: {msg}") from None
    root = spec_path.parent
    if (root.parent.name, root.name) != (spec.name, spec.version):
        raise PatchsetError(
            f"{spec_path}: declares {spec.ref} but lives in {root.parent.name}/{root.name}"
        )
    return spec


def _load_lock(path: Path) -> PatchsetLock | None:
    if not path.is_file():
        return None
    try:
        return PatchsetLock.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise PatchsetError(f"{path}: unreadable lock: {str(exc).splitlines()[0]}") from None
