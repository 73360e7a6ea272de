"""Which patchset version each host gets, for commands that take -p."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ddtree_deploy.patchset import default_patchsets_dir
from ddtree_deploy.results import HostResult
from ddtree_deploy.stages import PatchsetChoice, PreparedPatchset, prepare_choice

if TYPE_CHECKING:
    from ddtree_deploy.pipeline import HostRun

ReadOnlyFn = Callable[["HostRun", PreparedPatchset | None], HostResult]


def load_choice(ref: str, patchsets_dir: Path | None, strict: bool = False) -> PatchsetChoice:
    """The version(s) of `ref` hosts may get, each through the local gate; raises ConfigError."""
    return prepare_choice(patchsets_dir or default_patchsets_dir(), ref, strict)


def optional_choice(
    ref: str | None, patchsets_dir: Path | None, strict: bool
) -> PatchsetChoice | None:
    """`load_choice` for a read-only command's optional -p: None when it is not given."""
    return load_choice(ref, patchsets_dir, strict) if ref else None


def read_only_fn(fn: ReadOnlyFn, choice: PatchsetChoice | None) -> Callable[[HostRun], HostResult]:
    """Return the host function of a read-only command: `fn` with the host's version of
    `choice` (its -p, see `optional_choice`), or without a patchset when -p is not given
    or (unless --strict) no version targets the host, the reason appended to the message:
    such hosts are still reported."""
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import per_host

    if choice is None:
        return lambda run: fn(run, None)

    def fallback(run: HostRun, reason: str) -> HostResult:
        result = fn(run, None)
        return replace(result, message=f"{result.message}; {reason}" if result.message else reason)

    return per_host(choice, fn, fallback=fallback)
