"""`history`: who deployed what, when, and how it ended, across the fleet (changes nothing)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from .command import host_command
from .context import RunContext
from .rollout import connect_first_hosts, run_and_exit

MAX_DEPLOYS = 10_000  # a bound on one answer's size, far past what a journal keeps

LastOpt = Annotated[
    int,
    typer.Option(
        "--last",
        min=1,
        max=MAX_DEPLOYS,
        metavar="N",
        help="Deploys per host, the most recently started.",
    ),
]


@host_command
def history(run: RunContext, last: LastOpt = 20) -> None:
    """Deploys per host from its journal (and the journal's rotated files): patchset, how
    it ended (committed, rolled_back, ...), when, by whom, and why it was rolled back. One
    read-only round trip per host; a table on stdout, or with --json one `history` event
    per deploy (data.deploy)."""
    hosts = run.targets.resolve()
    connect_first_hosts(run, hosts)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline.history import history_host
    from ddtree_deploy.report.history import history_table

    fn = partial(history_host, deploys=last)
    run_and_exit(run, "history", hosts, fn, table=history_table, result_on_stdout=True)
