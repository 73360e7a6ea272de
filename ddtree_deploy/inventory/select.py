"""Pick the hosts a command acts on from --host/--group/--all/--limit (pure)."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory.models import Host, Inventory, RestartGroup


def select_hosts(
    inventory: Inventory,
    names: list[str] | None = None,
    groups: list[str] | None = None,
    all_hosts: bool = False,
    limit: str | None = None,
) -> list[Host]:
    """Hosts in inventory order; raises InventoryError for unknown names/groups or no target.

    Each --host value is a comma list of names or globs (`gpu*`, `gpu[12]`), as --limit; a
    glob must match a host, an unknown name gets the nearest host suggested."""
    groups = groups or []
    names = expand_host_patterns(inventory, names or [])
    if not (names or groups or all_hosts):
        raise InventoryError(f"{inventory.source}: no target: give --host, --group or --all")
    known_groups = inventory.groups | set(inventory.restart_groups)
    for group in groups:
        if group not in known_groups:
            raise InventoryError(
                f"{inventory.source}: unknown group {group!r}{_nearest(group, known_groups)}"
            )
    members = {m for g in groups if g in inventory.restart_groups
               for m in inventory.restart_groups[g].members}  # fmt: skip
    chosen = [
        h
        for h in inventory.hosts.values()
        if all_hosts or h.name in names or set(h.groups) & set(groups) or h.name in members
    ]
    if limit:
        patterns = [p for p in limit.split(",") if p]
        chosen = [h for h in chosen if any(fnmatch.fnmatch(h.name, p) for p in patterns)]
        if not chosen:
            raise InventoryError(f"{inventory.source}: --limit {limit!r} matches no host")
    return chosen


def expand_host_patterns(inventory: Inventory, values: list[str]) -> list[str]:
    """The host names that --host values (comma lists of names and globs) stand for, in
    the order given; raises InventoryError for an unknown name or a glob matching none."""
    found: list[str] = []
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            if any(c in part for c in "*?["):
                matched = [h for h in inventory.hosts if fnmatch.fnmatchcase(h, part)]
                if not matched:
                    raise InventoryError(f"{inventory.source}: --host {part!r} matches no host")
            elif part in inventory.hosts:
                matched = [part]
            else:
                near = _nearest(part, inventory.hosts)
                raise InventoryError(f"{inventory.source}: unknown host {part!r}{near}")
            found += [name for name in matched if name not in found]
    return found


def _nearest(word: str, known: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the nearest of `known`, or ""."""
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def selected_restart_groups(
    inventory: Inventory, chosen: list[Host], ignore_groups: bool = False
) -> tuple[RestartGroup, ...]:
    """The restart groups whose members are all in `chosen` (each then runs as one unit);
    raises InventoryError naming the group when only some members are chosen (a
    multi-node server must not run mixed code), unless `ignore_groups` (then none)."""
    if ignore_groups:
        return ()
    names = {h.name for h in chosen}
    found = []
    for group in inventory.restart_groups.values():
        picked = [m for m in group.members if m in names]
        if picked and len(picked) < len(group.members):
            missing = ", ".join(m for m in group.members if m not in names)
            raise InventoryError(
                f"{inventory.source}: {', '.join(picked)} of restart group {group.name!r} "
                f"selected without {missing}: its members change and restart together "
                f"(select them all, e.g. -g {group.name}, or pass --ignore-groups)"
            )
        if picked:
            found.append(group)
    return tuple(found)
