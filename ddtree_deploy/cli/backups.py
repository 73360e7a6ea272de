"""`backups list|prune`: the backups kept on hosts."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from .command import host_command
from .confirm import confirm_deletion
from .context import RunContext
from .rollout import connect_first_hosts, run_and_exit

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
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (needed without a terminal).")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Say per host which backups would be deleted; delete nothing."
        ),
    ] = False,
) -> None:
    """Delete all but the newest --keep backups (never one of an unfinished deploy).

    Asks first, listing the hosts (--yes: don't; without a terminal --yes is required:
    exit 2, nothing deleted). --dry-run says per host which backups would go, from a
    read-only request (no lock taken)."""
    hosts = run.targets.resolve()
    if not dry_run:
        what = f"all but the newest {keep} backup(s) of each host"
        confirm_deletion(run.console, "backups prune", what, hosts, yes)
    connect_first_hosts(run, hosts)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import controller_holder, prune_host
    from ddtree_deploy.pipeline.dry_run import plan_prune_host

    if dry_run:
        run_and_exit(run, "backups prune (dry run)", hosts, lambda r: plan_prune_host(r, keep))
    holder = controller_holder()
    run_and_exit(
        run, "backups prune", hosts, lambda r: prune_host(r, holder, keep), command="backups prune"
    )
