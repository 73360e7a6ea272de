"""`status`: what is deployed on each host, drift, lock, journal, backups."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from .choice import optional_choice, read_only_fn
from .command import host_command
from .complete import complete_patchsets
from .context import RunContext
from .options import PatchsetsDirOpt, StrictOpt
from .rollout import connect_first_hosts, run_and_exit


@host_command
def status(
    run: RunContext,
    patchset: Annotated[
        str | None,
        typer.Option(
            "--patchset",
            "-p",
            metavar="NAME[@VERSION]",
            help="Also report drift against this.",
            autocompletion=complete_patchsets,
        ),
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 3 when a deployed patch is gone (its container was recreated).",
        ),
    ] = False,
) -> None:
    """Deployed patchset per host, drift, lock, last journal entries, backups, container."""
    hosts = run.targets.resolve()
    choice = optional_choice(patchset, patchsets_dir, strict)
    connect_first_hosts(run, hosts)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import status_host
    from ddtree_deploy.report import status_table

    fn = read_only_fn(partial(status_host, check=check), choice)
    run_and_exit(run, "status", hosts, fn, table=status_table, result_on_stdout=True)
