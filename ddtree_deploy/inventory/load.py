"""Read a TOML inventory into models, naming file, host and key in every error."""

from __future__ import annotations

import difflib
import os
import tomllib
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.gate.prompts import read_prompts
from ddtree_deploy.gate.settings import GateConfig
from ddtree_deploy.inventory.jumps import check_jump_chains
from ddtree_deploy.inventory.models import Host, Inventory, RestartGroup

ENV_VAR = "DDTREE_DEPLOY_INVENTORY"
DEFAULT_PATH = "inventories/default.toml"
_TOP_KEYS = {"defaults", "groups", "hosts"}
_SUBTABLES = ("service", "smoke", "serve", "hooks")
# What a [groups.NAME] table may set: its gate; `members` (+ leader...) make it a restart group.
_GROUP_KEYS = {"gate", "members", "leader", "restart", "start_order"}
_RESTART_KEYS = ("members", "leader", "restart", "start_order")
_LOADER_KEYS = {"jump_hosts"}  # host fields only the loader sets


def default_inventory_path() -> Path:
    """`$DDTREE_DEPLOY_INVENTORY`, else inventories/default.toml."""
    return Path(os.environ.get(ENV_VAR) or DEFAULT_PATH)


def load_inventory(path: Path) -> Inventory:
    """Parse and validate an inventory file; raises InventoryError with one clear line."""
    if not path.is_file():
        raise InventoryError(f"{path}: inventory file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InventoryError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InventoryError(f"{path}: TOML syntax error: {exc}") from exc
    return parse_inventory(raw, str(path))


def parse_inventory(raw: dict[str, Any], source: str) -> Inventory:
    """Validate an already-parsed TOML document (pure; used by tests and load). Every host's
    problems are reported at once, one line each (a key set in [defaults] is blamed on
    [defaults], once), with the nearest known key suggested for an unknown one."""
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise InventoryError("\n".join(
            f"{source}: unknown top-level key {key!r}{_suggest(key, _TOP_KEYS)}"
            for key in unknown
        ))  # fmt: skip
    defaults = raw.get("defaults", {})
    hosts_raw = raw.get("hosts", {})
    if not isinstance(defaults, dict):
        raise InventoryError(f"{source}: [defaults] must be a table")
    groups = _group_tables(raw.get("groups", {}), source)
    defaults = dict(defaults)
    default_gate = _gate_table(defaults.pop("gate", None), source, "[defaults]")
    if not isinstance(hosts_raw, dict) or not hosts_raw:
        raise InventoryError(f"{source}: no [hosts.NAME] tables")
    if "address" in defaults or "name" in defaults:
        raise InventoryError(f"{source}: [defaults] may not set 'address' or 'name'")
    hosts: dict[str, Host] = {}
    problems: list[str] = []
    for name, table in hosts_raw.items():
        if not isinstance(table, dict):
            problems.append(f"{source}: hosts.{name} must be a table")
            continue
        try:
            host = _build_host(name, table, defaults, source)
            hosts[name] = _with_gates(host, default_gate, groups, source)
        except InventoryError as exc:
            problems += [line for line in str(exc).splitlines() if line not in problems]
    if problems:
        raise InventoryError("\n".join(problems))
    hosts = _with_jump_hosts(hosts, source)
    _check_unique_addresses(hosts, source)
    restart_groups = _restart_groups(raw.get("groups", {}), hosts, source)
    return Inventory(source=source, hosts=hosts, restart_groups=restart_groups)


def _restart_groups(
    raw: dict[str, Any], hosts: dict[str, Host], source: str
) -> dict[str, RestartGroup]:
    """The [groups.NAME] tables with `members`: validated, every member a known host with a
    restartable service (not a container's), each host in one restart group at most."""
    found: dict[str, RestartGroup] = {}
    owner: dict[str, str] = {}
    for name, table in raw.items():
        keys = {key: table[key] for key in _RESTART_KEYS if key in table}
        if not keys:
            continue
        where = f"{source}: group {name!r}"
        if "members" not in keys or "leader" not in keys:
            raise InventoryError(f"{where}: a restart group needs 'members' and 'leader'")
        try:
            group = RestartGroup(name=name, **keys)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            raise InventoryError(f"{where}: {f'key {key!r}: ' if key else ''}{message}") from None
        for member in group.members:
            if member not in hosts:
                raise InventoryError(f"{where}: member {member!r} is not an inventory host")
            kinds = {spec.kind for spec, _ in hosts[member].named_services()}
            if not kinds or kinds & {"container"}:
                raise InventoryError(
                    f"{where}: member {member!r} needs a systemd or command service to "
                    f"restart together (it has: {', '.join(sorted(kinds)) or 'none'})"
                )
            if member in owner:
                raise InventoryError(
                    f"{where}: host {member!r} is already in restart group {owner[member]!r}"
                )
            owner[member] = name
        if not any(spec.health_checked for spec, _ in hosts[group.leader].named_services()):
            raise InventoryError(
                f"{where}: leader {group.leader!r} has only role = 'worker' services: the "
                "group's health is the leader's (give it a service without role 'worker')"
            )
        found[name] = group
    return found


def _with_jump_hosts(hosts: dict[str, Host], source: str) -> dict[str, Host]:
    """Each host with a `jump` gets the inventory hosts its chain reaches; raises
    InventoryError for an unknown name, a bad address or a loop."""
    try:
        reached = check_jump_chains({name: host.jump for name, host in hosts.items()})
    except ValueError as exc:
        raise InventoryError(f"{source}: {exc}") from None
    return {
        name: host.model_copy(update={"jump_hosts": tuple(hosts[n] for n in reached[name])})
        if name in reached
        else host
        for name, host in hosts.items()
    }


def _group_tables(raw: Any, source: str) -> dict[str, GateConfig | None]:
    """[groups.NAME] tables -> each group's gate settings; names the bad key."""
    if not isinstance(raw, dict):
        raise InventoryError(f"{source}: [groups] must be a table of [groups.NAME] tables")
    gates = {}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise InventoryError(f"{source}: groups.{name} must be a table")
        unknown = sorted(set(table) - _GROUP_KEYS)
        if unknown:
            raise InventoryError(f"{source}: group {name!r}: unknown key {unknown[0]!r}")
        gates[name] = _gate_table(table.get("gate", {}), source, f"group {name!r}")
    return gates


def _gate_table(raw: Any, source: str, where: str) -> GateConfig | None:
    """A [gate] table of [defaults] or a group, validated; None when absent."""
    if raw is None:
        return None
    try:
        return GateConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(["gate", *(str(p) for p in err["loc"])])
        if err["type"] == "extra_forbidden":
            raise InventoryError(f"{source}: {where}: unknown key {key!r}") from None
        raise InventoryError(f"{source}: {where}: key {key!r}: {err['msg']}") from None


def _with_gates(
    host: Host, default: GateConfig | None, groups: dict[str, GateConfig | None], source: str
) -> Host:
    """The host's gate: [defaults.gate] < its groups' (in its group order) < its own; and
    its gate prompts file read (a relative path is taken from the inventory's directory)."""
    gate = default
    for group in host.groups:
        group_gate = groups.get(group)
        if group_gate is not None:
            gate = group_gate.over(gate)
    if host.gate is not None:
        gate = host.gate.over(gate)
    prompts: tuple[dict[str, object], ...] = ()
    if gate is not None and gate.prompts is not None:
        path = Path(source).parent / gate.prompts
        try:
            prompts = read_prompts(path)
        except ValueError as exc:
            raise InventoryError(
                f"{source}: host {host.name!r}: key 'gate.prompts': {exc}"
            ) from None
        gate = gate.model_copy(update={"prompts": str(path)})
    return host.model_copy(update={"gate": gate, "gate_prompts": prompts})


def _merge(defaults: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """The host's table over [defaults], sub-tables key by key; each of the host's
    [[hosts.NAME.services]] over [defaults.service] (its shared keys: kind, timeouts...)."""
    merged = {**defaults, **table}
    for sub in _SUBTABLES:
        if isinstance(defaults.get(sub), dict) and isinstance(table.get(sub), dict):
            merged[sub] = {**defaults[sub], **table[sub]}
    services, shared = table.get("services"), defaults.get("service")
    if isinstance(services, list) and "service" not in table:
        merged.pop("service", None)
        if isinstance(shared, dict):
            merged["services"] = [
                {**shared, **entry} if isinstance(entry, dict) else entry for entry in services
            ]
    return merged


def _build_host(name: str, table: dict[str, Any], defaults: dict[str, Any], source: str) -> Host:
    """The host's model from its table over [defaults]; raises InventoryError with one line
    per problem, each naming the table that set the key (the host's or [defaults])."""
    data = _merge(defaults, table)
    where = f"{source}: host {name!r}"
    lines = [f"{where}: unknown key {key!r}" for key in sorted(_LOADER_KEYS & set(data))]
    try:
        host = Host(name=name, **{k: v for k, v in data.items() if k not in _LOADER_KEYS})
    except ValidationError as exc:
        lines += [_describe(err, where, table, defaults, source) for err in exc.errors()]
    except TypeError as exc:  # e.g. `name` given twice
        lines.append(f"{where}: {exc}")
    if lines:
        raise InventoryError("\n".join(dict.fromkeys(lines)))
    return host


def _describe(
    err: Any, where: str, table: dict[str, Any], defaults: dict[str, Any], source: str
) -> str:
    """One pydantic error as a line: the key's table ([defaults] when the host's own table
    does not set it), the key, the message; an unknown key gets the nearest known one."""
    loc = [str(part) for part in err["loc"]]
    key = ".".join(loc)
    if not key:  # a rule over several keys: its message names them
        return f"{where}: {err['msg'].removeprefix('Value error, ')}"
    if _set_by_defaults(loc, table, defaults):
        where = f"{source}: [defaults]"
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown key {key!r}{_suggest(loc[-1], _known_keys())}"
    if err["type"] == "missing":
        return f"{where}: missing required key {key!r}"
    return f"{where}: key {key!r}: {err['msg']}"


def _set_by_defaults(loc: list[str], table: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """True when the value at `loc` comes from [defaults], not the host's own table."""
    own: Any = table
    shared: Any = defaults
    for part in loc:
        if isinstance(own, dict) and part in own:
            own, shared = own[part], shared.get(part) if isinstance(shared, dict) else None
            continue
        return isinstance(shared, dict) and part in shared
    return False


def _suggest(word: str, known: typing.Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the nearest known word, or ""."""
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


@cache
def _known_keys() -> frozenset[str]:
    """Every key an inventory host table may hold, at any depth (the models' field names)."""
    keys: set[str] = set()
    todo: list[type[BaseModel]] = [Host]
    while todo:
        model = todo.pop()
        for field_name, info in model.model_fields.items():
            if field_name in keys and field_name != "name":
                continue
            keys.add(field_name)
            todo += [m for m in _models_in(info.annotation) if m is not model]
    return frozenset(keys - _LOADER_KEYS)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (Optional[X], tuple[X, ...], X | None...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _check_unique_addresses(hosts: dict[str, Host], source: str) -> None:
    """Two hosts may share an SSH endpoint only as different containers on it.

    The endpoint includes the jump chain: 10.0.0.5 behind one bastion and 10.0.0.5 behind
    another (or reached directly) are different machines on different private networks.
    """
    seen: dict[tuple[str, int | None, str | None, str | None], str] = {}
    for host in hosts.values():
        if host.transport != "ssh":
            continue
        jump = ",".join(part.strip() for part in host.jump.split(",")) if host.jump else None
        key = (host.address, host.port, host.container, jump)
        if key in seen:
            raise InventoryError(
                f"{source}: host {host.name!r}: duplicate of host {seen[key]!r} ({host.label})"
            )
        seen[key] = host.name
