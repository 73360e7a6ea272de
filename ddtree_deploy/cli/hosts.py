"""`hosts check`: reachability and facts of hosts."""

from __future__ import annotations

from typing import Annotated

import typer

from .choice import optional_choice, read_only_fn
from .command import host_command
from .complete import complete_patchsets
from .context import RunContext
from .options import PatchsetsDirOpt, StrictOpt
from .rollout import connect_first_hosts, run_and_exit

hosts_app = typer.Typer(help="Reachability and facts of hosts.", no_args_is_help=True)


@hosts_app.command("check")
@host_command
def check(
    run: RunContext,
    patchset: Annotated[
        str | None,
        typer.Option(
            "--patchset",
            "-p",
            metavar="NAME[@VERSION]",
            help="Hash the files this patchset touches.",
            autocompletion=complete_patchsets,
        ),
    ] = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
) -> None:
    """Connect to hosts and report python, sglang version, site-packages, hashes, GPUs, lock."""
    hosts = run.targets.resolve()
    choice = optional_choice(patchset, patchsets_dir, strict)
    connect_first_hosts(run, hosts)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import hosts_check
    from ddtree_deploy.report import facts_table

    fn = read_only_fn(hosts_check, choice)
    run_and_exit(
        run,
        "hosts check",
        hosts,
        fn,
        table=facts_table,
        result_on_stdout=True,
        command="hosts check",
    )
