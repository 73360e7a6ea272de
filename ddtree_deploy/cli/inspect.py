"""Read-mostly commands: status, smoke, hosts check, backups list|prune."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated

import typer

from ddtree_deploy.pipeline import (
    HostResult,
    HostRun,
    controller_holder,
    hosts_check,
    per_host,
    prune_host,
    smoke_host,
    status_host,
)
from ddtree_deploy.report import backups_table, facts_table, smoke_table, status_table
from ddtree_deploy.stages import PreparedPatchset, default_smoke_dir, load_smoke_sources

from .common import (
    AllOpt,
    GroupOpt,
    HostOpt,
    InventoryOpt,
    JsonOpt,
    JunitOpt,
    LimitOpt,
    Output,
    ParallelOpt,
    PatchsetOpt,
    PatchsetsDirOpt,
    ShardOpt,
    StrictOpt,
    SummaryFileOpt,
    Targets,
    handle_config_errors,
    load_choice,
    run_and_exit,
)

hosts_app = typer.Typer(help="Reachability and facts of hosts.", no_args_is_help=True)
backups_app = typer.Typer(help="Backups kept on hosts.", no_args_is_help=True)


def status(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    shard: ShardOpt = None,
    patchset: Annotated[
        str | None, typer.Option("--patchset", "-p", help="Also report drift against this.")
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    json: JsonOpt = False,
    junit: JunitOpt = None,
    summary_file: SummaryFileOpt = None,
    parallel: ParallelOpt = 16,
) -> None:
    """Deployed patchset per host, drift, lock, last journal entries, backups."""
    _status(**locals())


@handle_config_errors
def _status(**o) -> None:
    hosts = Targets.of(o).resolve()
    run_and_exit(
        "status",
        hosts,
        _read_only(o, status_host),
        Output.of(o),
        o["parallel"],
        table=status_table,
    )


def smoke(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    shard: ShardOpt = None,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    suite: Annotated[
        list[str] | None,
        typer.Option(
            "--suite",
            "-s",
            help="Suite to run (repeat); default: the patchset's suites and after_restart.",
        ),
    ] = None,
    json: JsonOpt = False,
    junit: JunitOpt = None,
    summary_file: SummaryFileOpt = None,
    parallel: ParallelOpt = 16,
) -> None:
    """Run smoke suites on hosts against what is installed now (changes nothing)."""
    _smoke(**locals())


@handle_config_errors
def _smoke(**o) -> None:
    hosts = Targets.of(o).resolve()
    choice = load_choice(o["patchset"], o["patchsets_dir"], o["strict"])
    sources = load_smoke_sources(o["suite"] or choice.suite_names, default_smoke_dir())

    def smoke_picked(run: HostRun, prepared: PreparedPatchset) -> HostResult:
        names = o["suite"] or [*prepared.suites, *prepared.after_restart]
        mine = {k: v for k, v in sources.items() if k in names or k.endswith(".py")}
        return smoke_host(run, prepared, mine)

    run_and_exit(
        f"smoke {choice.label}",
        hosts,
        per_host(choice, smoke_picked),
        Output.of(o),
        o["parallel"],
        table=smoke_table,
    )


@hosts_app.command("check")
def hosts_check_cmd(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    patchset: Annotated[
        str | None, typer.Option("--patchset", "-p", help="Hash the files this patchset touches.")
    ] = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    json: JsonOpt = False,
    junit: JunitOpt = None,
) -> None:
    """Connect to hosts and report python, sglang version, site-packages, hashes, GPUs, lock."""
    _hosts_check(**locals())


@handle_config_errors
def _hosts_check(**o) -> None:
    hosts = Targets.of(o).resolve()
    run_and_exit(
        "hosts check",
        hosts,
        _read_only(o, hosts_check),
        Output.of(o),
        table=facts_table,
    )


def _read_only(o: dict, fn: Callable[[HostRun, PreparedPatchset | None], HostResult]):
    """Return the host function of a read-only command: `fn` with the host's version of -p,
    or without a patchset when -p is not given or (unless --strict) no version targets the
    host, the reason appended to the message: such hosts are still reported."""
    if not o["patchset"]:
        return lambda run: fn(run, None)
    choice = load_choice(o["patchset"], o["patchsets_dir"], o["strict"])

    def fallback(run: HostRun, reason: str) -> HostResult:
        result = fn(run, None)
        return replace(result, message=f"{result.message}; {reason}" if result.message else reason)

    return per_host(choice, fn, fallback=fallback)


@backups_app.command("list")
def backups_list(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    json: JsonOpt = False,
) -> None:
    """List the backups kept on each host."""
    _backups_list(**locals())


@handle_config_errors
def _backups_list(**o) -> None:
    hosts = Targets.of(o).resolve()
    run_and_exit(
        "backups", hosts, lambda r: status_host(r, None), Output.of(o), table=backups_table
    )


@backups_app.command("prune")
def backups_prune(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    keep: Annotated[int, typer.Option("--keep", min=1, help="Backups to keep per host.")] = 5,
    json: JsonOpt = False,
    parallel: ParallelOpt = 16,
) -> None:
    """Delete all but the newest --keep backups (never one of an unfinished deploy)."""
    _backups_prune(**locals())


@handle_config_errors
def _backups_prune(**o) -> None:
    hosts = Targets.of(o).resolve()
    holder = controller_holder()
    run_and_exit(
        "backups prune",
        hosts,
        lambda r: prune_host(r, holder, o["keep"]),
        Output.of(o),
        o["parallel"],
    )
