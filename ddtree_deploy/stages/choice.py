"""Which version of a patchset each host gets: one fixed version, or one per target.

`-p NAME@VERSION` fixes the version. `-p NAME` fixes the highest version when every version
of NAME targets the same package version (what it always did); when the versions target
different package versions (e.g. ddtree 1.x for sglang 0.5.13.post1, 2.x for 0.5.23), each
host gets the highest version whose target equals its installed version, read from the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import Patchset, list_patchsets, resolve_patchset, split_ref
from ddtree_deploy.stages.prepared import PreparedPatchset, prepare_patchset


@dataclass(frozen=True)
class PatchsetChoice:
    """The candidates for a `--patchset` ref, at most one per target version.

    `candidates` are ordered by version, lowest first; `fixed` is set when every host gets
    the same one (no host facts are needed to choose). `strict` makes a host without a
    matching version a failure (REFUSED) instead of a skipped host (NOT_STARTED).
    """

    ref: str
    candidates: tuple[PreparedPatchset, ...]
    fixed: PreparedPatchset | None = None
    strict: bool = False

    @property
    def name(self) -> str:
        return self.candidates[-1].name

    @property
    def package(self) -> str:
        return self.candidates[-1].package

    @property
    def label(self) -> str:
        """What titles show: `ddtree@1.0.0`, or `ddtree (per host: ...)`."""
        if self.fixed is not None:
            return self.fixed.ref
        return f"{self.name} (per host: {self.describe_targets()})"

    def describe_targets(self) -> str:
        """Return `ddtree@1.1.0 for sglang 0.5.13.post1, ddtree@2.0.0 for sglang 0.5.23`."""
        return ", ".join(f"{c.ref} for {c.package} {c.target_version}" for c in self.candidates)

    def for_version(self, installed: str | None) -> PreparedPatchset | None:
        """Return the candidate for a host whose package is at `installed`, or None."""
        if self.fixed is not None:
            return self.fixed
        matching = [c for c in self.candidates if c.target_version == installed]
        return matching[-1] if matching else None

    @property
    def suite_names(self) -> list[str]:
        """Every smoke suite any candidate runs (install-time, then after-restart), once."""
        names = [n for c in self.candidates for n in (*c.suites, *c.after_restart)]
        return list(dict.fromkeys(names))


def highest_per_target(versions: list[Patchset]) -> list[Patchset]:
    """Return the highest version for each target, ordered by version (input: sorted)."""
    best: dict[tuple[str, str], Patchset] = {}
    for patchset in versions:
        best[(patchset.spec.target.package, patchset.spec.target.version)] = patchset
    order = {p.ref: i for i, p in enumerate(versions)}
    return sorted(best.values(), key=lambda p: order[p.ref])


def prepare_choice(base: Path, ref: str, strict: bool = False) -> PatchsetChoice:
    """Resolve `ref` under `base` and run the local gate on each candidate.

    Only the candidates a host could get are gated: the pinned version, or the highest
    version per target. Raises PatchsetError for an unknown ref or a failed gate.
    """
    name, version = split_ref(ref)
    siblings = [p for p in list_patchsets(base) if p.spec.name == name]
    if version:
        prepared = prepare_patchset(resolve_patchset(base, ref), siblings)
        return PatchsetChoice(ref, (prepared,), fixed=prepared, strict=strict)
    if not siblings:
        raise PatchsetError(f"{base}: no patchset named {name!r}")
    candidates = tuple(prepare_patchset(p, siblings) for p in highest_per_target(siblings))
    fixed = candidates[0] if len(candidates) == 1 else None
    return PatchsetChoice(ref, candidates, fixed=fixed, strict=strict)
