"""Give each host the version of a patchset that targets its installed package.

With a fixed choice (`-p NAME@VERSION`, or all versions of NAME for one target) nothing
changes: no extra round trip. Otherwise one `facts` request tagged `connect` reads the
host's installed version first, and the chosen version runs the command as usual.

A host for which no version matches ends NOT_STARTED ("skipped": exit 0, never changed),
or REFUSED (exit 2) under `--strict`; the message names its version and the targets there are.
"""

from __future__ import annotations

from collections.abc import Callable

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import ask_facts
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PatchsetChoice, PreparedPatchset
from ddtree_deploy.stages import op_builders as ops

PICK_STAGE = Stage.CONNECT

PreparedFn = Callable[[HostRun, PreparedPatchset], HostResult]
FallbackFn = Callable[[HostRun, str], HostResult]


def read_package_version(run: HostRun, package: str) -> str | None | HostResult:
    """Return the host's installed version of `package` (None: not installed), or a
    NEEDS_ATTENTION result when the host cannot be reached or cannot answer (REFUSED for
    an unknown or changed host key)."""
    op = ops.facts_op(run.host, None, package=package, read_serve=False)
    facts = ask_facts(run, PICK_STAGE, op)
    return facts if isinstance(facts, HostResult) else facts.package_version


def no_match_message(choice: PatchsetChoice, installed: str | None) -> str:
    """Return why a host gets no version: what it has and what the versions target."""
    have = f"{choice.package} {installed}" if installed else f"{choice.package} not installed"
    return f"{have}: no version of {choice.name} targets it (have {choice.describe_targets()})"


def pick_patchset(run: HostRun, choice: PatchsetChoice) -> PreparedPatchset | HostResult:
    """Return the version `run`'s host gets, or the result that ends the host here.

    Fixed choice: returned at once (no I/O). Per host: one facts round trip, then the
    highest version whose target equals the installed version; an info event on `connect`
    names it (data: patchset, package_version). No match: NOT_STARTED, or REFUSED if strict.
    """
    if choice.fixed is not None:
        return choice.fixed
    installed = read_package_version(run, choice.package)
    if isinstance(installed, HostResult):
        return installed
    picked = choice.for_version(installed)
    if picked is None:
        outcome = Outcome.REFUSED if choice.strict else Outcome.NOT_STARTED
        message = no_match_message(choice, installed)
        data = {"patchset": None, "package_version": installed}
        run.recorder.info(PICK_STAGE, message, data=data)
        return run.result(outcome, message, details={"package_version": installed})
    run.recorder.info(
        PICK_STAGE,
        f"{choice.package} {installed}: {picked.ref}",
        data={"patchset": picked.ref, "package_version": installed},
    )
    return picked


def per_host(
    choice: PatchsetChoice, fn: PreparedFn, fallback: FallbackFn | None = None
) -> Callable[[HostRun], HostResult]:
    """Return a host function that picks the host's version, then runs `fn` with it.

    `fallback(run, message)` (read-only commands: status, hosts check) runs instead of
    ending NOT_STARTED when no version matches and the choice is not strict.
    """

    def run_host(run: HostRun) -> HostResult:
        picked = pick_patchset(run, choice)
        if isinstance(picked, PreparedPatchset):
            return fn(run, picked)
        if fallback is not None and picked.outcome == Outcome.NOT_STARTED:
            return fallback(run, picked.message)
        return picked

    return run_host
