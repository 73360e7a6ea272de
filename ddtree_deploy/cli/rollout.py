"""The one place that runs a command across hosts and turns the results into output + exit."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import RenderableType
from rich.text import Text

from ddtree_deploy.fleet import RolloutPolicy, first_started
from ddtree_deploy.fleet.ahead import connect_ahead
from ddtree_deploy.inventory import Host
from ddtree_deploy.results import HostResult

from . import exit_codes
from .context import RunContext, data_console

if TYPE_CHECKING:
    from ddtree_deploy.fleet.run import GroupUnit, HostFn, UndoFn

Table = Callable[[list[HostResult]], RenderableType]


def connect_first_hosts(
    run: RunContext, hosts: list[Host], policy: RolloutPolicy | None = None, grouped: bool = False
) -> None:
    """Open the connections of the hosts the rollout will start first, while the command
    loads the rest of what it needs (fleet/ahead.py). Call it once the command's local
    input is checked and confirmed: connecting changes nothing on a host, but a command
    that is refused should not log in anywhere. Not done for restart groups (`grouped`),
    whose members start together as units."""
    if grouped:
        return
    first = set(first_started([h.name for h in hosts], policy or RolloutPolicy(run.parallel)))
    connect_ahead([h for h in hosts if h.name in first])


def run_and_exit(
    run: RunContext,
    title: str,
    hosts: list[Host],
    fn: HostFn,
    table: Table | None = None,
    policy: RolloutPolicy | None = None,
    undo: UndoFn | None = None,
    groups: tuple[GroupUnit, ...] = (),
    result_on_stdout: bool = False,
    command: str | None = None,
) -> NoReturn:
    """Run fn across hosts per policy (default: --parallel at a time), print the summary, write
    JUnit and the Markdown summary; raise typer.Exit with the documented code (the most urgent
    host outcome wins).

    `result_on_stdout` (read-only commands: plan, status, hosts check, backups list): the
    result tables are the command's data and go to stdout (terminal width, unlimited when
    piped), unless --json owns stdout; progress and errors stay on stderr.

    `command`: the command's name as each --json `summary` line records it (default: the
    title's first word, e.g. `push` of `push ddtree@1.1.0`).
    """
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.fleet import run_rollout
    from ddtree_deploy.pipeline import new_run_id
    from ddtree_deploy.report import (
        FanoutSink,
        JsonLinesSink,
        append_summary,
        fleet_table,
        gate_table,
        progress_sink,
        summary_markdown,
        write_junit,
    )

    console, out = run.console, run.output
    policy = policy or RolloutPolicy(parallel=run.parallel)
    with progress_sink(console, title, [h.name for h in hosts], out.verbosity) as human:
        named = command or title.split(" ", 1)[0]
        sink = FanoutSink(JsonLinesSink(command=named) if out.json_lines else None, human)
        fleet = run_rollout(hosts, fn, new_run_id(), sink, policy, undo, groups)
    data = data_console() if result_on_stdout and not out.json_lines else console
    if not hosts:
        console.print(Text(f"{title}: no hosts selected (empty shard): nothing to do"))
    elif table is not None:
        data.print(table(fleet.results))
        if fleet.stopped:
            console.print(Text.assemble(("stopped:", "bold red"), f" {fleet.stopped}"))
    else:
        data.print(fleet_table(title, fleet.results, fleet.stopped))
    if (checks := gate_table(fleet.results)) is not None:
        data.print(checks)
    if out.junit:
        write_junit(out.junit, title, fleet.results)
    if out.summary_file:
        append_summary(out.summary_file, summary_markdown(title, fleet.results, fleet.stopped))
    raise typer.Exit(exit_codes.exit_code(fleet.results))
