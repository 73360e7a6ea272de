"""Which patchset version each host gets, for commands that take -p."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ddtree_deploy.patchset import default_patchsets_dir
from ddtree_deploy.pipeline import HostRun, per_host
from ddtree_deploy.results import HostResult
from ddtree_deploy.stages import PatchsetChoice, PreparedPatchset, prepare_choice

ReadOnlyFn = Callable[[HostRun, PreparedPatchset | None], HostResult]


def load_choice(ref: str, patchsets_dir: Path | None, strict: bool = False) -> PatchsetChoice:
    """The version(s) of `ref` hosts may get, each through the local gate; raises ConfigError."""
    return prepare_choice(patchsets_dir or default_patchsets_dir(), ref, strict)


def read_only_fn(
    fn: ReadOnlyFn, ref: str | None, patchsets_dir: Path | None, strict: bool
) -> Callable[[HostRun], HostResult]:
    """Return the host function of a read-only command: `fn` with the host's version of -p,
    or without a patchset when -p is not given or (unless --strict) no version targets the
    host, the reason appended to the message: such hosts are still reported."""
    if not ref:
        return lambda run: fn(run, None)
    choice = load_choice(ref, patchsets_dir, strict)

    def fallback(run: HostRun, reason: str) -> HostResult:
        result = fn(run, None)
        return replace(result, message=f"{result.message}; {reason}" if result.message else reason)

    return per_host(choice, fn, fallback=fallback)
