"""Options that several commands take, but not every one (those are in `context`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ddtree_deploy.gate.settings import GateMode

from .complete import complete_patchsets
from .confirm import CONFIRM_ABOVE_HOSTS

if TYPE_CHECKING:
    from ddtree_deploy.inventory import Host

PatchsetOpt = Annotated[
    str,
    typer.Option(
        "--patchset",
        "-p",
        metavar="NAME[@VERSION]",
        help="NAME@VERSION, or NAME: per host, its highest version targeting the host's sglang.",
        autocompletion=complete_patchsets,
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="With -p NAME: a host no version of NAME targets fails (exit 2) instead of "
        "being skipped.",
    ),
]
PatchsetsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--patchsets-dir", metavar="DIR", help="Where patchsets live [env DDTREE_DEPLOY_PATCHSETS]."
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help=f"Do not ask before changing more than {CONFIRM_ABOVE_HOSTS} hosts on a terminal.",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Say per host what would be restored or deleted, and whether it would be "
        "refused; change nothing (read-only requests only, no lock taken).",
    ),
]
NoRestartOpt = Annotated[
    bool, typer.Option("--no-restart", help="Do not restart the service (skips health).")
]
IsolatedImportsOpt = Annotated[
    bool,
    typer.Option(
        "--isolated-imports",
        help="`imports` suite: each patched module in a fresh interpreter of its own (slow) "
        "instead of a child forked from one warm parent, for hosts where fork is unsafe; "
        "as inventory [hosts.NAME.smoke] isolated_imports = true.",
    ),
]
IgnoreGroupsOpt = Annotated[
    bool,
    typer.Option(
        "--ignore-groups",
        help="Act on members of a restart group ([groups.NAME] members) on their own, each "
        "restarted alone (normally refused: the group's hosts change and restart together).",
    ),
]
BreakLockOpt = Annotated[
    bool, typer.Option("--break-lock", help="Take over a lock held by another run (shown).")
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Restore also over files changed on the host since the deploy (hand edits, "
        "normally refused with exit 2): their bytes are first saved beside the backup.",
    ),
]


class GateChoice(StrEnum):
    """--gate: the serving gate's mode (gate/settings.py GateMode)."""

    OFF = "off"
    QUICK = "quick"
    FULL = "full"
    OBSERVE = "observe"


GateModeOpt = Annotated[
    GateChoice | None,
    typer.Option(
        "--gate",
        metavar="off|quick|full|observe",
        help="The serving gate: off, quick (replay the prompts, compare with the old "
        "server's baseline), full (replay + sustained load + bake) or observe (full's "
        "checks, measured and reported, but a push never rolls back on a failed one). "
        "Default: as the patchset's/inventory's [gate] says (off without one).",
    ),
]


def gate_mode(choice: GateChoice | None) -> GateMode | None:
    """The --gate value as the pipeline takes it (None: not given)."""
    if choice is None:
        return None
    modes: dict[GateChoice, GateMode] = {
        GateChoice.OFF: "off",
        GateChoice.QUICK: "quick",
        GateChoice.FULL: "full",
        GateChoice.OBSERVE: "observe",
    }
    return modes[choice]


def with_isolated_imports(hosts: list[Host], isolated: bool) -> list[Host]:
    """`hosts`, each with smoke.isolated_imports on when --isolated-imports was given."""
    if not isolated:
        return hosts
    return [
        host.model_copy(update={"smoke": host.smoke.model_copy(update={"isolated_imports": True})})
        for host in hosts
    ]
