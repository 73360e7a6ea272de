"""The run context every host command shares: its options, typed, and the console for people.

`SharedOptions` is the one declaration of the shared options: each field is a Typer option
(`Annotated`), and `cli.command` turns the fields into parameters of the root callback and of every
host command. `RunContext` is what a command gets (and what sits on `ctx.obj`).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.fleet import parse_shard, shard_items
from ddtree_deploy.inventory import Host, default_inventory_path, load_inventory, select_hosts
from ddtree_deploy.inventory.models import RestartGroup
from ddtree_deploy.inventory.select import selected_restart_groups

from .complete import complete_groups, complete_hosts, complete_limit

InventoryOpt = Annotated[
    Path | None,
    typer.Option(
        "--inventory",
        "-i",
        metavar="FILE",
        help="Inventory TOML [env DDTREE_DEPLOY_INVENTORY, else inventories/default.toml].",
    ),
]
HostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--host",
        "-H",
        metavar="HOST",
        help="Target host (repeat).",
        autocompletion=complete_hosts,
    ),
]
GroupOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--group",
        "-g",
        metavar="GROUP",
        help="Target group (repeat).",
        autocompletion=complete_groups,
    ),
]
AllOpt = Annotated[bool, typer.Option("--all", help="Target every host of the inventory.")]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        "--limit",
        metavar="GLOB[,GLOB...]",
        help="Keep only hosts matching these glob(s), comma-sep.",
        autocompletion=complete_limit,
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="I/N",
        help="Only shard I of N (1-based) of the selection, round-robin: 2/4.",
    ),
]
MAX_VERBOSITY = 2  # -vvv says no more than -vv
MAX_PARALLEL = 1024  # one thread and one SSH connection each
ParallelOpt = Annotated[
    int,
    typer.Option(
        "--parallel", min=1, max=MAX_PARALLEL, metavar="N", help="Hosts at a time (1-1024)."
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="JSON Lines events on stdout; human output on stderr.")
]
JunitOpt = Annotated[
    Path | None, typer.Option("--junit", metavar="FILE", help="Write JUnit XML here.")
]
SummaryFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--summary-file",
        metavar="FILE",
        help='Append a Markdown summary table here (e.g. "$GITHUB_STEP_SUMMARY").',
    ),
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        show_default=False,
        help="More detail on stderr: -v every stage start, -vv also each event's details "
        "(plain lines, as --json has them).",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Less on stderr: only errors (failed stages) and the final result table.",
    ),
]
BecomeOpt = Annotated[
    bool,
    typer.Option(
        "--become",
        help="Run the agent (and so every service command) through `sudo -n -u "
        'BECOME_USER` on the selected hosts, as inventory `become = "sudo"` does '
        "(become_user: the inventory's, default root).",
    ),
]


@dataclass(frozen=True)
class SharedOptions:
    """The options of every host command, given before or after the command name."""

    inventory: InventoryOpt = None
    host: HostOpt = None
    group: GroupOpt = None
    all_hosts: AllOpt = False
    limit: LimitOpt = None
    shard: ShardOpt = None
    parallel: ParallelOpt = 16
    json_lines: JsonOpt = False
    junit: JunitOpt = None
    summary_file: SummaryFileOpt = None
    verbose: VerboseOpt = 0
    quiet: QuietOpt = False
    become: BecomeOpt = False


@dataclass(frozen=True)
class Targets:
    """Which hosts a command acts on: inventory, -H/-g/--all, --limit, --shard; --become
    turns sudo on for every one of them."""

    inventory: Path | None = None
    hosts: list[str] | None = None
    groups: list[str] | None = None
    all_hosts: bool = False
    limit: str | None = None
    shard: str | None = None
    become: bool = False

    def resolve(self) -> list[Host]:
        """Selected hosts in inventory order, narrowed to --shard, with become = "sudo" under
        --become; raises ConfigError."""
        inventory = load_inventory(self.inventory or default_inventory_path())
        chosen = select_hosts(inventory, self.hosts, self.groups, self.all_hosts, self.limit)
        if self.shard:
            chosen = shard_items(chosen, *parse_shard(self.shard))
        if self.become:
            chosen = [host.model_copy(update={"become": "sudo"}) for host in chosen]
        return chosen

    def restart_groups(self, chosen: list[Host], ignore: bool) -> tuple[RestartGroup, ...]:
        """The restart groups among `chosen` (all members selected); raises ConfigError
        when a group is only partly selected, unless `ignore` (--ignore-groups)."""
        inventory = load_inventory(self.inventory or default_inventory_path())
        return selected_restart_groups(inventory, chosen, ignore)


@dataclass(frozen=True)
class Output:
    """Where results go besides the console: JSON Lines on stdout, JUnit, a Markdown summary."""

    json_lines: bool = False
    junit: Path | None = None
    summary_file: Path | None = None
    verbose: int = 0  # -v 1, -vv 2
    quiet: bool = False

    @property
    def verbosity(self) -> int:
        """How much progress goes to stderr: -1 quiet (-q), 0 normal, 1 (-v), 2 (-vv)."""
        return -1 if self.quiet else min(self.verbose, MAX_VERBOSITY)

    def check(self) -> None:
        """Raise ConfigError when both -q and -v were given."""
        if self.quiet and self.verbose:
            raise ConfigError("give -q (quieter) or -v (more detail), not both")


@dataclass(frozen=True)
class RunContext:
    """What a command runs with: its shared options and the console for people (stderr)."""

    console: Console
    options: SharedOptions = SharedOptions()

    @property
    def targets(self) -> Targets:
        opts = self.options
        selection = (opts.host, opts.group, opts.all_hosts, opts.limit, opts.shard)
        return Targets(opts.inventory, *selection, become=opts.become)

    @property
    def output(self) -> Output:
        opts = self.options
        return Output(opts.json_lines, opts.junit, opts.summary_file, opts.verbose, opts.quiet)

    @property
    def parallel(self) -> int:
        return self.options.parallel

    def overridden(self, options: SharedOptions, given: set[str]) -> RunContext:
        """This context with the fields named in `given` taken from `options` (those the user
        gave after the command name win over those given before it)."""
        changes = {name: getattr(options, name) for name in given}
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))


UNLIMITED_WIDTH = 1_000_000  # piped: a table is as wide as its content, no line wraps


def new_console() -> Console:
    """The console for people: stderr, so stdout stays data; the terminal's width on a
    terminal, unlimited when redirected (a log file gets whole lines and whole cells);
    guarded (`guard_console`)."""
    return guard_console(_unlimited_off_terminal(Console(stderr=True)))


def data_console() -> Console:
    """The console for a read-only command's result (a table) on stdout: the terminal's
    width on a terminal; piped, unlimited, so `| grep`/`| less -S` see whole rows."""
    return guard_console(_unlimited_off_terminal(Console(file=sys.stdout)))


def _unlimited_off_terminal(console: Console) -> Console:
    """``console``, its width unlimited unless it writes to a terminal (as Rich decides:
    a tty, or FORCE_TERMINAL/TTY_COMPATIBLE set); on a terminal it keeps the terminal's."""
    if not console.is_terminal:
        console.width = UNLIMITED_WIDTH
    return console


def guard_console(console: Console) -> Console:
    """`console` with a last guard against a host's terminal control: a printed segment that
    holds a control character is cleaned by report/clean.py's `clean_text` (the sinks clean
    host text before layout; this catches what reaches the console another way). Returns it.
    """
    console.push_render_hook(_Guard())
    return console


class _Guard(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Guarded(renderable) for renderable in renderables]


class _Guarded:
    """A renderable whose segments' text is cleaned; Rich's own control segments (the live
    view's cursor moves) pass. report/ is imported only for a segment that needs it: it is
    not loaded at start-up, before the first connect (tests/cli/test_startup.py)."""

    def __init__(self, inner: ConsoleRenderable):
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            text = segment.text
            if segment.control or text == "\n" or text.isprintable():
                yield segment
                continue
            from ddtree_deploy.report.clean import clean_text

            yield Segment(clean_text(text), segment.style)
