"""`backups list|prune`: the backups kept on hosts."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from .command import host_command
from .context import RunContext
from .rollout import run_and_exit

backups_app = typer.Typer(help="Backups kept on hosts.", no_args_is_help=True)


@backups_app.command("list")
@host_command
def list_backups(run: RunContext) -> None:
    """List the backups kept on each host."""
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import status_host
    from ddtree_deploy.report import backups_table

    hosts = run.targets.resolve()
    fn = partial(status_host, prepared=None, drift=False)
    run_and_exit(
        run,
        "backups",
        hosts,
        fn,
        table=backups_table,
        result_on_stdout=True,
        command="backups list",
    )


@backups_app.command("prune")
@host_command
def prune(
    run: RunContext,
    keep: Annotated[
        int, typer.Option("--keep", min=1, metavar="N", help="Backups to keep per host.")
    ] = 5,
) -> None:
    """Delete all but the newest --keep backups (never one of an unfinished deploy)."""
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import controller_holder, prune_host

    hosts = run.targets.resolve()
    holder = controller_holder()
    run_and_exit(
        run, "backups prune", hosts, lambda r: prune_host(r, holder, keep), command="backups prune"
    )
