"""`patchset new --from-host HOST`: the host from the inventory, one read-only request, and
what a transport failure means for the exit code.

The capture itself is pipeline/capture.py; here only what a command line adds: which
inventory, and how a host that cannot be reached ends the command (a host key, route,
container or sudo refusal is bad input, exit 2; a host that is down, exit 3).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from ddtree_deploy.errors import (
    BecomeError,
    ContainerError,
    HostKeyError,
    RouteError,
    TransportError,
)
from ddtree_deploy.patchset.capture import Capture
from ddtree_deploy.patchset.models import Target
from ddtree_deploy.pipeline import capture_host
from ddtree_deploy.transport import open_transport

from . import exit_codes
from .context import Targets

REFUSED = (HostKeyError, RouteError, ContainerError, BecomeError)


def capture_inventory_host(
    console: Console, inventory: Path | None, host_name: str, target: Target
) -> Capture:
    """Return the Capture of `target`'s package as edited on inventory host `host_name`.

    Raises InventoryError (an unknown host: exit 2) and PatchsetError (the host refused:
    another version, an editable install, a binary file...: exit 2); a transport failure
    is printed and ends the command (typer.Exit 2 for a refused connection, else 3).
    """
    (host,) = Targets(inventory=inventory, hosts=[host_name]).resolve()
    try:
        with open_transport(host) as transport:
            return capture_host(transport, target)
    except TransportError as exc:
        refused = isinstance(exc, REFUSED)
        line = Text.assemble(("error:", "bold red"), f" {exc}")
        console.print(line, highlight=False, soft_wrap=True)
        code = exit_codes.BAD_INPUT if refused else exit_codes.NEEDS_ATTENTION
        raise typer.Exit(code) from None
