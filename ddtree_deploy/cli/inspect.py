"""Read-mostly commands: status, smoke, hosts check, backups list|prune."""

from __future__ import annotations

from typing import Annotated

import typer

from ddtree_deploy.pipeline import (
    controller_holder,
    hosts_check,
    prune_host,
    smoke_host,
    status_host,
)
from ddtree_deploy.report import backups_table, facts_table, smoke_table, status_table
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources

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
    SummaryFileOpt,
    Targets,
    handle_config_errors,
    load_prepared,
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
    prepared = load_prepared(o["patchset"], o["patchsets_dir"]) if o["patchset"] else None
    run_and_exit(
        "status",
        hosts,
        lambda r: status_host(r, prepared),
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
    prepared = load_prepared(o["patchset"], o["patchsets_dir"])
    names = o["suite"] or [*prepared.suites, *prepared.after_restart]
    sources = load_smoke_sources(names, default_smoke_dir())
    run_and_exit(
        f"smoke {prepared.ref}",
        hosts,
        lambda r: smoke_host(r, prepared, sources),
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
    json: JsonOpt = False,
    junit: JunitOpt = None,
) -> None:
    """Connect to hosts and report python, sglang version, site-packages, hashes, GPUs, lock."""
    _hosts_check(**locals())


@handle_config_errors
def _hosts_check(**o) -> None:
    hosts = Targets(o["inventory"], o["host"], o["group"], o["all_hosts"], o["limit"]).resolve()
    prepared = load_prepared(o["patchset"], o["patchsets_dir"]) if o["patchset"] else None
    run_and_exit(
        "hosts check",
        hosts,
        lambda r: hosts_check(r, prepared),
        Output(o["json"], o["junit"]),
        table=facts_table,
    )


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
    hosts = Targets(o["inventory"], o["host"], o["group"], o["all_hosts"], o["limit"]).resolve()
    run_and_exit(
        "backups", hosts, lambda r: status_host(r, None), Output(o["json"]), table=backups_table
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
    hosts = Targets(o["inventory"], o["host"], o["group"], o["all_hosts"], o["limit"]).resolve()
    holder = controller_holder()
    run_and_exit(
        "backups prune",
        hosts,
        lambda r: prune_host(r, holder, o["keep"]),
        Output(o["json"]),
        o["parallel"],
    )
