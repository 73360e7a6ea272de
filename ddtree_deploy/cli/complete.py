"""Shell completion of option values: host and group names from the inventory (-H, -g,
--limit) and `NAME@VERSION` from the patchset store (-p).

Typer calls these while the shell asks for completions (`--install-completion` sets that
up). A completer never raises: any error (no inventory, a broken file, an unreadable
folder) gives no completions rather than a traceback in the middle of the user's line.
The inventory and patchsets dir are the ones the command line names so far (-i,
--patchsets-dir, before or after the command name), else their defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ddtree_deploy.inventory import Inventory, default_inventory_path, load_inventory


def given_value(ctx: typer.Context, name: str) -> Any:
    """The value of parameter `name` given so far on this command or a parent (the
    command's own wins, as for the shared options), else None."""
    here: Any = ctx
    while here is not None:
        value = (here.params or {}).get(name)
        if value is not None:
            return value
        here = here.parent
    return None


def _never_raising(fn: Callable[[typer.Context, str], list[str]]) -> Callable[..., list[str]]:
    """`fn`, returning [] instead of raising (see module)."""

    def complete(ctx: typer.Context, incomplete: str) -> list[str]:
        try:
            return fn(ctx, incomplete or "")
        except Exception:  # noqa: BLE001  a completer must never break the user's shell line
            return []

    complete.__name__ = fn.__name__
    complete.__doc__ = fn.__doc__
    return complete


def _inventory(ctx: typer.Context) -> Inventory:
    given = given_value(ctx, "inventory")
    return load_inventory(Path(given) if given else default_inventory_path())


def _hosts(ctx: typer.Context, incomplete: str) -> list[str]:
    """The inventory's host names starting with `incomplete`, in inventory order."""
    return [name for name in _inventory(ctx).hosts if name.startswith(incomplete)]


def _groups(ctx: typer.Context, incomplete: str) -> list[str]:
    """The inventory's group names (host groups and restart groups), sorted."""
    inventory = _inventory(ctx)
    names = sorted(inventory.groups | set(inventory.restart_groups))
    return [name for name in names if name.startswith(incomplete)]


def _limit(ctx: typer.Context, incomplete: str) -> list[str]:
    """--limit takes comma-separated globs: complete the last one with a host name, the
    ones before it kept as typed (`a1,b` -> `a1,b1`, `a1,b2`)."""
    done, comma, last = incomplete.rpartition(",")
    head = done + comma
    return [head + name for name in _inventory(ctx).hosts if name.startswith(last)]


def _patchsets(ctx: typer.Context, incomplete: str) -> list[str]:
    """Every NAME and NAME@VERSION of the patchset store starting with `incomplete`: the
    folders PATCHSETS/NAME/VERSION holding a patchset.toml (not parsed: completion stays
    fast), versions oldest first."""
    from ddtree_deploy.patchset import default_patchsets_dir, version_key
    from ddtree_deploy.patchset.load import SPEC_NAME

    given = given_value(ctx, "patchsets_dir")
    base = Path(given) if given else default_patchsets_dir()
    versions: dict[str, list[str]] = {}
    for spec in base.glob(f"*/*/{SPEC_NAME}"):
        versions.setdefault(spec.parent.parent.name, []).append(spec.parent.name)
    found: list[str] = []
    for name in sorted(versions):
        found.append(name)
        for version in sorted(versions[name], key=_safe_key(version_key)):
            found.append(f"{name}@{version}")
    return [ref for ref in found if ref.startswith(incomplete)]


def _safe_key(key: Callable[[str], Any]) -> Callable[[str], tuple[int, Any, str]]:
    """A sort key that puts versions `key` cannot read last instead of raising."""

    def safe(version: str) -> tuple[int, Any, str]:
        try:
            return (0, key(version), version)
        except Exception:  # noqa: BLE001  a folder name that is no version
            return (1, None, version)

    return safe


complete_hosts = _never_raising(_hosts)
complete_groups = _never_raising(_groups)
complete_limit = _never_raising(_limit)
complete_patchsets = _never_raising(_patchsets)
