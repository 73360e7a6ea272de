"""Pick the hosts a command acts on from --host/--group/--all/--limit (pure)."""

from __future__ import annotations

import fnmatch

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory.models import Host, Inventory


def select_hosts(
    inventory: Inventory,
    names: list[str] | None = None,
    groups: list[str] | None = None,
    all_hosts: bool = False,
    limit: str | None = None,
) -> list[Host]:
    """Hosts in inventory order; raises InventoryError for unknown names/groups or no target."""
    names, groups = names or [], groups or []
    if not (names or groups or all_hosts):
        raise InventoryError(f"{inventory.source}: no target: give --host, --group or --all")
    for name in names:
        if name not in inventory.hosts:
            raise InventoryError(f"{inventory.source}: unknown host {name!r}")
    known_groups = inventory.groups
    for group in groups:
        if group not in known_groups:
            raise InventoryError(f"{inventory.source}: unknown group {group!r}")
    chosen = [
        h
        for h in inventory.hosts.values()
        if all_hosts or h.name in names or set(h.groups) & set(groups)
    ]
    if limit:
        patterns = [p for p in limit.split(",") if p]
        chosen = [h for h in chosen if any(fnmatch.fnmatch(h.name, p) for p in patterns)]
        if not chosen:
            raise InventoryError(f"{inventory.source}: --limit {limit!r} matches no host")
    return chosen
