"""Find patchsets on disk and load them with their lock; every error names the file."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.models import PatchsetLock, PatchsetSpec

ENV_VAR = "DDTREE_DEPLOY_PATCHSETS"
LOCK_NAME = "patchset.lock.json"
SPEC_NAME = "patchset.toml"


@dataclass(frozen=True)
class Patchset:
    """A patchset directory: its spec, its lock (if written), where it lives."""

    root: Path
    spec: PatchsetSpec
    lock: PatchsetLock | None

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


def default_patchsets_dir() -> Path:
    """$DDTREE_DEPLOY_PATCHSETS, else ./patchsets, else the one beside this package."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path("patchsets")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "patchsets"


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in version.replace("-", ".").split("."))


def list_patchsets(base: Path) -> list[Patchset]:
    """Every patchset under base/NAME/VERSION, sorted by name then version."""
    found = [load_patchset(spec.parent) for spec in sorted(base.glob(f"*/*/{SPEC_NAME}"))]
    return sorted(found, key=lambda p: (p.spec.name, _version_key(p.spec.version)))


def resolve_patchset(base: Path, ref: str) -> Patchset:
    """`name@version`, or `name` for its highest version."""
    name, _, version = ref.partition("@")
    if version:
        root = base / name / version
        if not (root / SPEC_NAME).is_file():
            raise PatchsetError(f"{root / SPEC_NAME}: patchset {ref!r} not found")
        return load_patchset(root)
    candidates = [p for p in list_patchsets(base) if p.spec.name == name]
    if not candidates:
        raise PatchsetError(f"{base}: no patchset named {name!r}")
    return candidates[-1]


def load_patchset(root: Path) -> Patchset:
    """Load patchset.toml (+ lock); raise PatchsetError naming the file and key."""
    spec_path = root / SPEC_NAME
    try:
        raw = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PatchsetError(f"{spec_path}: not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PatchsetError(f"{spec_path}: cannot parse: {exc}") from None
    try:
        spec = PatchsetSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise PatchsetError(f"{spec_path}: key {key!r}: {msg}") from None
    if (root.parent.name, root.name) != (spec.name, spec.version):
        raise PatchsetError(
            f"{spec_path}: declares {spec.ref} but lives in {root.parent.name}/{root.name}"
        )
    return Patchset(root=root, spec=spec, lock=_load_lock(root / LOCK_NAME))


def _load_lock(path: Path) -> PatchsetLock | None:
    if not path.is_file():
        return None
    try:
        return PatchsetLock.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise PatchsetError(f"{path}: unreadable lock: {str(exc).splitlines()[0]}") from None
