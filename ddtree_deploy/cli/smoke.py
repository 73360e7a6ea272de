"""`smoke`: run smoke suites against what is installed now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ddtree_deploy.results import HostResult
from ddtree_deploy.stages import PreparedPatchset, default_smoke_dir, load_smoke_sources

from .choice import load_choice
from .command import host_command
from .context import RunContext
from .options import (
    IsolatedImportsOpt,
    PatchsetOpt,
    PatchsetsDirOpt,
    StrictOpt,
    with_isolated_imports,
)
from .rollout import connect_first_hosts, run_and_exit

if TYPE_CHECKING:
    from ddtree_deploy.pipeline import HostRun

SuiteOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--suite",
        "-s",
        metavar="SUITE",
        help="Suite to run (repeat); default: the patchset's suites and after_restart.",
    ),
]


@host_command
def smoke(
    run: RunContext,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    suite: SuiteOpt = None,
    isolated_imports: IsolatedImportsOpt = False,
) -> None:
    """Run smoke suites on hosts against what is installed now (changes nothing)."""
    hosts = with_isolated_imports(run.targets.resolve(), isolated_imports)
    choice = load_choice(patchset, patchsets_dir, strict)
    sources = load_smoke_sources(suite or choice.suite_names, default_smoke_dir())
    connect_first_hosts(run, hosts)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import per_host, smoke_host
    from ddtree_deploy.report import smoke_table

    def smoke_picked(host_run: HostRun, prepared: PreparedPatchset) -> HostResult:
        names = suite or [*prepared.suites, *prepared.after_restart]
        mine = {k: v for k, v in sources.items() if k in names or k.endswith(".py")}
        return smoke_host(host_run, prepared, mine)

    run_and_exit(
        run, f"smoke {choice.label}", hosts, per_host(choice, smoke_picked), table=smoke_table
    )
