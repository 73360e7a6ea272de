"""Options that several commands take, but not every one (those are in `context`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ddtree_deploy.gate.settings import GateMode

from .confirm import CONFIRM_ABOVE_HOSTS

PatchsetOpt = Annotated[
    str,
    typer.Option(
        "--patchset",
        "-p",
        help="NAME@VERSION, or NAME: per host, its highest version targeting the host's sglang.",
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
        "--patchsets-dir", help=escape("Where patchsets live [env DDTREE_DEPLOY_PATCHSETS].")
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
NoRestartOpt = Annotated[
    bool, typer.Option("--no-restart", help="Do not restart the service (skips health).")
]
BreakLockOpt = Annotated[
    bool, typer.Option("--break-lock", help="Take over a lock held by another run (shown).")
]


class GateChoice(StrEnum):
    """--gate: the serving gate's mode (gate/settings.py GateMode)."""

    OFF = "off"
    QUICK = "quick"
    FULL = "full"


GateModeOpt = Annotated[
    GateChoice | None,
    typer.Option(
        "--gate",
        help=escape(
            "The serving gate: off, quick (replay the prompts, compare with the old "
            "server's baseline) or full (replay + sustained load + bake). Default: as the "
            "patchset's/inventory's [gate] says (off without one)."
        ),
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
    }
    return modes[choice]
