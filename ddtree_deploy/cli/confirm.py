"""Asking before a command changes many hosts from a terminal."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from ddtree_deploy.inventory import Host

from . import exit_codes

# Changing more hosts than this from a terminal asks first (unless --yes).
CONFIRM_ABOVE_HOSTS = 10


def confirm_targets(console: Console, action: str, hosts: list[Host], yes: bool) -> None:
    """Ask on a terminal before changing many hosts; without a TTY (CI) never ask.

    Raises typer.Exit (bad input, nothing changed) when the user says no.
    """
    if yes or len(hosts) <= CONFIRM_ABOVE_HOSTS or not sys.stdin.isatty():
        return
    if not typer.confirm(f"{action} on {len(hosts)} hosts?", default=False, err=True):
        console.print("aborted: nothing changed")
        raise typer.Exit(exit_codes.BAD_INPUT)
