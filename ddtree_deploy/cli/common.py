"""Options every command shares, and the one place that turns results into output + exit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.fleet import HostFn, run_hosts
from ddtree_deploy.inventory import Host, default_inventory_path, load_inventory, select_hosts
from ddtree_deploy.patchset import default_patchsets_dir, resolve_patchset
from ddtree_deploy.pipeline import HostResult, new_run_id
from ddtree_deploy.report import ConsoleSink, FanoutSink, JsonLinesSink, summary_table, write_junit
from ddtree_deploy.stages import PreparedPatchset, prepare_patchset

from . import exit_codes

InventoryOpt = Annotated[
    Path | None,
    typer.Option(
        "--inventory",
        "-i",
        help="Inventory TOML [env DDTREE_DEPLOY_INVENTORY, else inventories/default.toml].",
    ),
]
HostOpt = Annotated[list[str] | None, typer.Option("--host", "-H", help="Target host (repeat).")]
GroupOpt = Annotated[list[str] | None, typer.Option("--group", "-g", help="Target group (repeat).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Target every host of the inventory.")]
LimitOpt = Annotated[
    str | None, typer.Option("--limit", help="Keep only hosts matching these glob(s), comma-sep.")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="JSON Lines events on stdout; human output on stderr.")
]
JunitOpt = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")]
ParallelOpt = Annotated[int, typer.Option("--parallel", min=1, help="Hosts at a time.")]
PatchsetOpt = Annotated[
    str, typer.Option("--patchset", "-p", help="NAME@VERSION, or NAME for its highest version.")
]
PatchsetsDirOpt = Annotated[
    Path | None,
    typer.Option("--patchsets-dir", help="Where patchsets live [env DDTREE_DEPLOY_PATCHSETS]."),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show every stage start.")]

console = Console(stderr=True)


@dataclass(frozen=True)
class Targets:
    inventory: Path | None
    hosts: list[str] | None
    groups: list[str] | None
    all_hosts: bool
    limit: str | None = None

    def resolve(self) -> list[Host]:
        inventory = load_inventory(self.inventory or default_inventory_path())
        return select_hosts(inventory, self.hosts, self.groups, self.all_hosts, self.limit)


@dataclass(frozen=True)
class Output:
    json: bool = False
    junit: Path | None = None
    verbose: bool = False

    def sink(self):
        human = ConsoleSink(console, verbose=self.verbose)
        return FanoutSink(JsonLinesSink() if self.json else None, human)


def load_prepared(ref: str, patchsets_dir: Path | None) -> PreparedPatchset:
    return prepare_patchset(resolve_patchset(patchsets_dir or default_patchsets_dir(), ref))


def handle_config_errors(fn: Callable) -> Callable:
    """Bad input: one line on stderr, exit 2, before any remote I/O."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(exit_codes.BAD_INPUT) from None

    return wrapper


def run_and_exit(
    title: str,
    hosts: list[Host],
    fn: HostFn,
    out: Output,
    parallel: int = 16,
    table: Callable[[list[HostResult]], object] | None = None,
) -> None:
    """Run fn on every host, print the summary, write JUnit, exit with the documented code."""
    results = run_hosts(hosts, fn, new_run_id(), out.sink(), parallel)
    console.print(table(results) if table else summary_table(title, results))
    if out.junit:
        write_junit(out.junit, title, results)
    raise typer.Exit(exit_codes.exit_code(results))
