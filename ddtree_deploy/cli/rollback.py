"""`rollback`: restore the backup of the last committed deploy (or a chosen one)."""

from __future__ import annotations

from typing import Annotated

import typer

from ddtree_deploy.pipeline import controller_holder, rollback_host

from .command import host_command
from .confirm import confirm_targets
from .context import RunContext
from .options import BreakLockOpt, NoRestartOpt, YesOpt
from .rollout import run_and_exit


@host_command
def rollback(
    run: RunContext,
    to: Annotated[str | None, typer.Option("--to", help="Restore this deploy's backup.")] = None,
    no_restart: NoRestartOpt = False,
    break_lock: BreakLockOpt = False,
    yes: YesOpt = False,
) -> None:
    """Restore the backup of the last committed deploy (or --to DEPLOY_ID), then health-check."""
    hosts = run.targets.resolve()
    holder = controller_holder()
    restart = not no_restart
    confirm_targets(run.console, "rollback", hosts, yes)
    run_and_exit(
        run, "rollback", hosts, lambda r: rollback_host(r, holder, to, restart, break_lock)
    )
