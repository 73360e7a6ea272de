"""`push --retry FILE`: the hosts a previous push left failed, not started or needing
attention, read from that push's `--json` output (report/retry.py) and found in today's
inventory."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.inventory import Host, default_inventory_path, load_inventory

from .context import RunContext

RetryOpt = Annotated[
    Path | None,
    typer.Option(
        "--retry",
        metavar="FILE.jsonl",
        help="Push again only the hosts a previous push left failed, not started or needing "
        "attention, read from what its --json wrote (its last run); give -p as then. "
        "Replaces -H/-g/--all; --limit and --shard still narrow.",
    ),
]


def retry_targets(run: RunContext, path: Path, ignore_groups: bool = False) -> list[Host]:
    """The hosts to push again from the push output in `path`, in inventory order, with
    the other members of their restart groups (unless `ignore_groups`: --ignore-groups),
    narrowed by --limit/--shard and with --become as given; [] when none needs it (said on
    stderr).

    Raises ConfigError naming the file and the problem: unreadable, not a push's JSON Lines,
    -H/-g/--all given too, or hosts to retry that today's inventory lacks (named).
    """
    opts = run.options
    if opts.host or opts.group or opts.all_hosts:
        raise ConfigError(
            f"--retry {path}: the file picks the hosts; drop -H/--group/--all "
            "(--limit and --shard still narrow them)"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"--retry {path}: not UTF-8 text: not a --json output") from None
    except OSError as exc:
        raise ConfigError(f"--retry {path}: cannot read: {exc.strerror or exc}") from None
    # Loaded only with --retry: a plain push's start-up stays as it was (cli/__init__.py).
    from ddtree_deploy.report.retry import read_retry_plan

    try:
        plan = read_retry_plan(text.splitlines())
    except ValueError as exc:
        raise ConfigError(f"--retry {path}: {exc}") from None
    picked = plan.hosts
    if not picked:
        run.console.print(
            Text(
                f"--retry {path}: every host of push run {plan.run_id} ended ok or "
                f"no_changes ({len(plan.outcomes)} hosts): nothing to retry"
            ),
            soft_wrap=True,
        )
        return []
    inventory = load_inventory(opts.inventory or default_inventory_path())
    missing = [name for name in picked if name not in inventory.hosts]
    if missing:
        raise ConfigError(
            f"--retry {path}: host(s) to retry not in the inventory {inventory.source}: "
            f"{', '.join(missing)}"
        )
    # a restart group's members change and restart together: a retry takes them all
    partners = [
        member
        for group in inventory.restart_groups.values()
        if not ignore_groups and set(group.members) & set(picked)
        for member in group.members
        if member not in picked
    ]
    names = [*picked, *dict.fromkeys(partners)]
    targets = dataclasses.replace(run.targets, hosts=names, groups=None, all_hosts=False)
    hosts = targets.resolve()
    shown = ", ".join(
        f"{h.name} ({plan.outcomes[h.name].value if h.name in plan.outcomes else 'its group'})"
        for h in hosts
    )
    also = f" (the last of {plan.runs_in_file} runs in the file)" if plan.runs_in_file > 1 else ""
    run.console.print(
        Text(f"--retry {path}: push run {plan.run_id}{also}: retrying {len(hosts)}: {shown}"),
        soft_wrap=True,
    )
    return hosts
