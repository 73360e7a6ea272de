"""Options that several commands take, but not every one (those are in `context`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

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
