"""A patchset read once per run and turned into what agent requests carry."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ddtree_deploy.errors import ConfigError, PatchsetError
from ddtree_deploy.gate.prompts import Prompt, read_prompts
from ddtree_deploy.gate.settings import GateConfig
from ddtree_deploy.patchset import Patchset, check_sources
from ddtree_deploy.patchset.models import LosslessConfig, ServeConfig
from ddtree_deploy.patchset.sources import read_source

SMOKE_ENV = "DDTREE_DEPLOY_SMOKE_DIR"


@dataclass(frozen=True)
class PreparedFile:
    path: str
    kind: str
    source: bytes
    base_sha256: str | None
    result_sha256: str
    upgrade_sha256: tuple[str, ...] = ()  # results of sibling versions: upgrades in place

    @property
    def module(self) -> str | None:
        """Dotted module name of a .py file (`a/b/__init__.py` -> `a.b`)."""
        if not self.path.endswith(".py"):
            return None
        parts = self.path[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)


@dataclass(frozen=True)
class PreparedPatchset:
    """Everything about one patchset a push needs, checked by the local gate."""

    ref: str
    name: str
    version: str
    package: str
    target_version: str
    files: tuple[PreparedFile, ...]
    suites: tuple[str, ...]
    after_restart: tuple[str, ...]
    smoke_timeout_s: float
    serve: ServeConfig | None = None
    lossless: LosslessConfig | None = None
    references: tuple[dict[str, Any], ...] = ()  # the lossless reference files, parsed
    gate: GateConfig | None = None  # the serving gate's defaults ([gate])
    gate_prompts: tuple[Prompt, ...] = ()  # [gate] prompts, else the [lossless] prompts
    import_timeout_s: float = 300.0  # `imports`: one module's import at most, then killed

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def modules(self) -> list[str]:
        return [m for f in self.files if (m := f.module)]


def prepare_patchset(patchset: Patchset, siblings: Sequence[Patchset] = ()) -> PreparedPatchset:
    """The local gate: lock present and matching every source; raises PatchsetError.

    `siblings` are other locked versions of the same patchset for the same target: a host
    at one of them may be upgraded in place (its files are backed up like any base).
    """
    lock = check_sources(patchset)
    upgrades: dict[str, set[str]] = {}
    for other in siblings:
        same = (other.spec.name, other.spec.target) == (patchset.spec.name, patchset.spec.target)
        if other.lock is None or not same or other.ref == patchset.ref:
            continue
        for path, locked in other.lock.files.items():
            upgrades.setdefault(path, set()).add(locked.result_sha256)
    files = tuple(
        PreparedFile(
            path=entry.path,
            kind=entry.kind,
            source=read_source(patchset, entry),
            base_sha256=lock.files[entry.path].base_sha256,
            result_sha256=lock.files[entry.path].result_sha256,
            upgrade_sha256=tuple(sorted(upgrades.get(entry.path, set()))),
        )
        for entry in patchset.spec.files
    )
    spec = patchset.spec
    return PreparedPatchset(
        ref=spec.ref,
        name=spec.name,
        version=spec.version,
        package=spec.target.package,
        target_version=spec.target.version,
        files=files,
        suites=tuple(spec.smoke.suites),
        after_restart=tuple(spec.smoke.after_restart),
        smoke_timeout_s=spec.smoke.timeout_s,
        import_timeout_s=spec.smoke.import_timeout_s,
        serve=spec.serve,
        lossless=spec.lossless,
        references=load_references(patchset),
        gate=spec.gate,
        gate_prompts=load_gate_prompts(patchset),
    )


def load_gate_prompts(patchset: Patchset) -> tuple[Prompt, ...]:
    """The prompts the serving gate replays: the [gate] prompts file, else the [lossless]
    prompts, else none; raises PatchsetError naming a bad file."""
    spec = patchset.spec
    if spec.gate is not None and spec.gate.prompts is not None:
        try:
            return read_prompts(patchset.source_path(spec.gate.prompts))
        except ValueError as exc:
            raise PatchsetError(str(exc)) from None
    if spec.lossless is not None:
        return tuple(p.model_dump(exclude_none=True) for p in spec.lossless.prompts)
    return ()


def load_references(patchset: Patchset) -> tuple[dict[str, Any], ...]:
    """Return the parsed [lossless] reference files; raise PatchsetError naming a bad one."""
    lossless = patchset.spec.lossless
    found = []
    for rel in lossless.references if lossless else []:
        path = patchset.source_path(rel)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PatchsetError(f"{path}: lossless reference not found") from None
        except (OSError, ValueError) as exc:
            raise PatchsetError(f"{path}: unreadable lossless reference: {exc}") from None
        missing = {"fingerprint", "dtype", "outputs"} - set(data if isinstance(data, dict) else {})
        if missing:
            raise PatchsetError(f"{path}: lossless reference lacks {sorted(missing)}")
        found.append(data)
    return tuple(found)


def default_smoke_dir() -> Traversable:
    """Return where the smoke suites are: ``$DDTREE_DEPLOY_SMOKE_DIR``, else the package data
    ``ddtree_deploy/smoke/`` (a plain directory in a wheel or a checkout)."""
    if os.environ.get(SMOKE_ENV):
        return Path(os.environ[SMOKE_ENV])
    return files("ddtree_deploy.smoke")


SUPPORT_PREFIX = "_"  # smoke/_*.py are helpers shipped beside every suite, not suites
NOT_SHIPPED = ("__init__.py",)  # makes smoke/ a package for the wheel; no host needs it


def load_smoke_sources(
    names: tuple[str, ...] | list[str], smoke_dir: Traversable
) -> dict[str, str]:
    """Source of each suite script (+ `_*.py` helpers); raises ConfigError for unknown ones."""
    entries = smoke_dir.iterdir() if smoke_dir.is_dir() else ()  # a missing dir knows none
    scripts = {
        entry.name: entry
        for entry in entries
        if entry.name.endswith(".py") and entry.name not in NOT_SHIPPED and entry.is_file()
    }
    sources = {
        name: scripts[name].read_text(encoding="utf-8")
        for name in sorted(scripts)
        if name.startswith(SUPPORT_PREFIX)
    }
    for name in names:
        script = scripts.get(f"{name}.py")
        if name.startswith(SUPPORT_PREFIX) or not name.isidentifier() or script is None:
            known = sorted(n[:-3] for n in scripts if not n.startswith(SUPPORT_PREFIX))
            raise ConfigError(f"{smoke_dir}: unknown smoke suite {name!r} (known: {known})")
        sources[name] = script.read_text(encoding="utf-8")
    return sources


def check_smoke_sources(names: Sequence[str], sources: dict[str, str], named_by: str) -> None:
    """Raise ConfigError naming the first suite of `names` that has no script in `sources`
    (suite name -> source, as load_smoke_sources returns); `named_by`: who named it (a
    patchset ref). A named suite is never dropped in silence: it would pass unrun."""
    for name in names:
        if name not in sources:
            loaded = sorted(n for n in sources if not n.endswith(".py"))
            raise ConfigError(
                f"{named_by}: smoke suite {name!r} has no source (loaded suites: {loaded}); "
                "load it with load_smoke_sources"
            )
