"""Asking before a command changes many hosts from a terminal, or deletes backups."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.text import Text

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.inventory import Host

from . import exit_codes

# Changing more hosts than this from a terminal asks first (unless --yes).
CONFIRM_ABOVE_HOSTS = 10


def stdin_is_terminal() -> bool:
    """Whether a question can be asked: stdin is a terminal (not CI, a pipe, a script)."""
    return sys.stdin.isatty()


def describe_change(action: str, change: str, hosts: list[Host]) -> Text:
    """What a command is about to do, for the question before it: the action, what it
    changes on each host (`change`, e.g. the patchset) and every host it will change, by
    name (all of them: the user is asked to approve exactly this list)."""
    names = ", ".join(host.name for host in hosts)
    return Text.assemble(
        (f"{action}", "bold"),
        f" will change {len(hosts)} host(s): {change}\n",
        ("hosts: ", "bold"),
        names,
    )


def confirm_targets(
    console: Console, action: str, hosts: list[Host], yes: bool, change: str = ""
) -> None:
    """Ask on a terminal before changing many hosts, after listing them and `change` (what
    each one gets: the patchset, the backup restored); without a TTY (CI) never ask.

    Raises typer.Exit (bad input, nothing changed) when the user says no.
    """
    if yes or len(hosts) <= CONFIRM_ABOVE_HOSTS or not stdin_is_terminal():
        return
    console.print(describe_change(action, change or action, hosts), soft_wrap=True)
    if not typer.confirm(f"{action} on {len(hosts)} hosts?", default=False, err=True):
        console.print("aborted: nothing changed")
        raise typer.Exit(exit_codes.BAD_INPUT)


def confirm_deletion(
    console: Console, action: str, what: str, hosts: list[Host], yes: bool
) -> None:
    """Ask before a command deletes data on hosts (`backups prune`), whatever their number,
    after listing them and `what` it deletes on each; --yes (`yes`) skips the question.

    Raises ConfigError (exit 2, nothing changed) when stdin is no terminal and --yes was not
    given (a script must say it means it), typer.Exit(2) when the user says no.
    """
    if yes or not hosts:
        return
    if not stdin_is_terminal():
        raise ConfigError(
            f"{action} deletes {what} and stdin is not a terminal to ask on: give --yes to "
            "delete, or --dry-run to see what it would delete; nothing changed"
        )
    console.print(describe_change(action, f"deletes {what}", hosts), soft_wrap=True)
    if not typer.confirm(f"{action} on {len(hosts)} host(s)?", default=False, err=True):
        console.print("aborted: nothing changed")
        raise typer.Exit(exit_codes.BAD_INPUT)
