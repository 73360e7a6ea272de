"""Options every command shares, and the one place that turns results into output + exit."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.fleet import (
    HostFn,
    RolloutPolicy,
    UndoFn,
    parse_batches,
    parse_count,
    parse_shard,
    run_rollout,
    shard_items,
)
from ddtree_deploy.inventory import Host, default_inventory_path, load_inventory, select_hosts
from ddtree_deploy.patchset import default_patchsets_dir
from ddtree_deploy.pipeline import HostResult, new_run_id
from ddtree_deploy.report import (
    ConsoleSink,
    FanoutSink,
    JsonLinesSink,
    append_summary,
    fleet_table,
    progress_sink,
    summary_markdown,
    write_junit,
)
from ddtree_deploy.stages import (
    PatchsetChoice,
    prepare_choice,
)

from . import exit_codes

# Changing more hosts than this from a terminal asks first (unless --yes).
CONFIRM_ABOVE_HOSTS = 10

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
ShardOpt = Annotated[
    str | None,
    typer.Option("--shard", help="Only shard I of N (1-based) of the selection, round-robin: 2/4."),
]
SummaryFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--summary-file",
        help='Append a Markdown summary table here (e.g. "$GITHUB_STEP_SUMMARY").',
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
CanaryOpt = Annotated[
    int,
    typer.Option("--canary", min=0, help="First N hosts alone; any failure stops the fleet."),
]
BatchOpt = Annotated[
    str | None,
    typer.Option(
        "--batch",
        help="Wave sizes after the canary: N, P% or a list like 1,5,25% (last one repeats).",
    ),
]
MaxFailOpt = Annotated[
    str | None,
    typer.Option(
        "--max-fail",
        help="Stop starting new hosts once more than N (or P%) hosts failed (default: no limit).",
    ),
]
RollbackOnAbortOpt = Annotated[
    bool,
    typer.Option(
        "--rollback-on-abort/--no-rollback-on-abort",
        help="After a stop, roll back every host this run deployed, so the fleet ends on "
        "the version it started on.",
    ),
]
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
    shard: str | None = None

    def resolve(self) -> list[Host]:
        """Selected hosts in inventory order, narrowed to --shard; raises ConfigError."""
        inventory = load_inventory(self.inventory or default_inventory_path())
        chosen = select_hosts(inventory, self.hosts, self.groups, self.all_hosts, self.limit)
        if self.shard:
            chosen = shard_items(chosen, *parse_shard(self.shard))
        return chosen

    @classmethod
    def of(cls, o: dict) -> Targets:
        """From a command's options (shard where the command has it)."""
        return cls(
            o["inventory"], o["host"], o["group"], o["all_hosts"], o["limit"], o.get("shard")
        )


@dataclass(frozen=True)
class Output:
    json: bool = False
    junit: Path | None = None
    verbose: bool = False
    summary_file: Path | None = None

    @classmethod
    def of(cls, o: dict) -> Output:
        """From a command's options (those it lacks stay off)."""
        return cls(o["json"], o.get("junit"), o.get("verbose", False), o.get("summary_file"))

    def sink(self):
        human = ConsoleSink(console, verbose=self.verbose)
        return FanoutSink(JsonLinesSink() if self.json else None, human)


def load_choice(ref: str, patchsets_dir: Path | None, strict: bool = False) -> PatchsetChoice:
    """The version(s) of `ref` hosts may get, each through the local gate."""
    return prepare_choice(patchsets_dir or default_patchsets_dir(), ref, strict)


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


def rollout_policy(o: dict) -> RolloutPolicy:
    """--parallel/--canary/--batch/--max-fail/--rollback-on-abort; raises ConfigError."""
    return RolloutPolicy(
        parallel=o.get("parallel", 16),
        canary=o.get("canary", 0),
        batches=parse_batches(o["batch"]) if o.get("batch") else (),
        max_fail=parse_count(o["max_fail"]) if o.get("max_fail") is not None else None,
        rollback_on_abort=o.get("rollback_on_abort", True),
    )


def confirm_targets(action: str, hosts: list[Host], yes: bool) -> None:
    """Ask on a terminal before changing many hosts; without a TTY (CI) never ask."""
    if yes or len(hosts) <= CONFIRM_ABOVE_HOSTS or not sys.stdin.isatty():
        return
    if not typer.confirm(f"{action} on {len(hosts)} hosts?", default=False, err=True):
        console.print("aborted: nothing changed")
        raise typer.Exit(exit_codes.BAD_INPUT)


def run_and_exit(
    title: str,
    hosts: list[Host],
    fn: HostFn,
    out: Output,
    parallel: int = 16,
    table: Callable[[list[HostResult]], object] | None = None,
    policy: RolloutPolicy | None = None,
    undo: UndoFn | None = None,
) -> None:
    """Run fn across hosts per policy, print the summary, write JUnit and the Markdown
    summary, exit with the documented code (the most urgent host outcome wins)."""
    policy = policy or RolloutPolicy(parallel=parallel)
    with progress_sink(console, title, [h.name for h in hosts], out.verbose) as human:
        sink = FanoutSink(JsonLinesSink() if out.json else None, human)
        fleet = run_rollout(hosts, fn, new_run_id(), sink, policy, undo)
    if not hosts:
        console.print(f"{title}: no hosts selected (empty shard): nothing to do")
    elif table is not None:
        console.print(table(fleet.results))
        if fleet.stopped:
            console.print(f"[bold red]stopped:[/] {fleet.stopped}", highlight=False)
    else:
        console.print(fleet_table(title, fleet.results, fleet.stopped))
    if out.junit:
        write_junit(out.junit, title, fleet.results)
    if out.summary_file:
        append_summary(out.summary_file, summary_markdown(title, fleet.results, fleet.stopped))
    raise typer.Exit(exit_codes.exit_code(fleet.results))
