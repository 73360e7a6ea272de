"""ssh_config for a whole fleet: each file parsed once per run, each lookup over the blocks
that can apply to the alias.

Paramiko parses and looks up (its OpenSSH rules: first value wins, `Host` patterns, `Match`).
What it does not do is scale to a fleet: every host used to parse the files again, and
`SSHConfig.lookup` tries every block in the files, twice, asking the OS for the local user
name once per block. With an ssh_config that lists each host (what `gcloud compute
config-ssh` and other inventory tools write), a 1,000-host push spent ≈ 20 ms parsing and
≈ 31 ms looking up per host: ≈ 50 s of controller CPU, growing as hosts². Here the files are
parsed once per run (kept while their stat is unchanged), and a lookup runs Paramiko's own
`lookup` over the blocks that may apply, in their order: those whose `Host` line names the
alias literally, and every block that may apply to any alias (a wildcard or an fnmatch
class, `Match`, each file's leading options). A `Host` block whose plain patterns are all
literal names applies to no other alias (Paramiko compares them with fnmatch, which is
string equality for them; negated patterns only narrow a block), so the answer is the one
the whole files give: tests/transport/test_ssh_config.py holds the two equal on a config
with every kind of block.
"""

from __future__ import annotations

import os
import threading
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import paramiko

from ddtree_deploy.errors import RouteError
from ddtree_deploy.transport.filecache import FileCache, identity

SSH_CONFIG_ENV = "DDTREE_DEPLOY_SSH_CONFIG"
USER_SSH_CONFIG = "~/.ssh/config"
SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"

_FNMATCH_SPECIAL = frozenset("*?[")


class FleetSSHConfig:
    """Parsed ssh_config files with lookups narrowed to the blocks that can apply.

    Narrowing reads Paramiko's parsed blocks (`SSHConfig._config`: a list of dicts, each
    with `host` or `matches`, and `config`). When they are not in that shape, or a block
    sets CanonicalizeHostname (whose second pass looks up another name), every lookup is
    Paramiko's over all blocks: slower, never different. Answers are kept per alias (a
    bastion is looked up once, not once per host behind it).
    """

    def __init__(self, config: paramiko.SSHConfig):
        self._config = config
        self._blocks: list[dict[str, Any]] | None = _blocks_of(config)
        self._by_name: dict[str, list[int]] = {}
        self._always: list[int] = []
        for index, block in enumerate(self._blocks or ()):
            names = _literal_names(block)
            if names is None:
                self._always.append(index)
            for name in names or ():
                self._by_name.setdefault(name, []).append(index)
        self._lock = threading.Lock()
        self._answers: dict[str, Mapping[str, Any]] = {}

    @property
    def narrowing(self) -> bool:
        """Whether lookups run over the alias's blocks only (see the class docstring)."""
        return self._blocks is not None

    def lookup(self, alias: str) -> Mapping[str, Any]:
        """What the files say for `alias` (lowercase keys), as `paramiko.SSHConfig.lookup`."""
        with self._lock:
            known = self._answers.get(alias)
        if known is not None:
            return known
        if self._blocks is None or alias.startswith("!"):  # Paramiko reads `!x` as a name too
            answer = types.MappingProxyType(self._config.lookup(alias))
        else:
            picked = sorted({*self._always, *self._by_name.get(alias, ())})
            blocks = [self._blocks[i] for i in picked]
            answer = types.MappingProxyType(_with_blocks(blocks).lookup(alias))
        with self._lock:
            self._answers[alias] = answer
        return answer


def read_ssh_config(host_name: str) -> FleetSSHConfig:
    """`$DDTREE_DEPLOY_SSH_CONFIG` alone (as `ssh -F FILE`), else ~/.ssh/config then
    /etc/ssh/ssh_config (either may be absent), parsed once while they are unchanged;
    raises RouteError naming `host_name` for a missing override or an unreadable file."""
    override = os.environ.get(SSH_CONFIG_ENV)
    names = [override] if override else [USER_SSH_CONFIG, SYSTEM_SSH_CONFIG]
    paths = [Path(os.path.expanduser(name)) for name in names]
    if override and identity(paths[0]) is None:
        raise RouteError(host_name, f"{SSH_CONFIG_ENV}={override}: no such file")
    return _PARSED.get(paths, lambda present: FleetSSHConfig(_parse(host_name, present)))


_PARSED: FileCache[FleetSSHConfig] = FileCache()


def _parse(host_name: str, paths: list[Path]) -> paramiko.SSHConfig:
    config = paramiko.SSHConfig()
    for path in paths:
        try:
            with path.open(encoding="utf-8") as fh:
                config.parse(fh)
        except (OSError, UnicodeDecodeError, paramiko.SSHException) as exc:
            raise RouteError(host_name, f"ssh_config {path}: {exc}") from None
    return config


def _blocks_of(config: paramiko.SSHConfig) -> list[dict[str, Any]] | None:
    """Paramiko's parsed blocks when they have the shape narrowing relies on, else None."""
    blocks = getattr(config, "_config", None)
    if not isinstance(blocks, list):
        return None
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("config"), dict):
            return None
        if "canonicalizehostname" in block["config"]:
            return None
    return blocks


def _literal_names(block: dict[str, Any]) -> list[str] | None:
    """The names a `Host` block can apply to when its plain patterns are all literal names
    (negated patterns only narrow it further); None for a block that may apply to any alias
    (a wildcard or fnmatch class among the plain patterns, a `Match`)."""
    patterns = block.get("host")
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        return None
    names = [pattern for pattern in patterns if not pattern.startswith("!")]
    if any(_FNMATCH_SPECIAL.intersection(name) for name in names):
        return None
    return names


def _with_blocks(blocks: list[dict[str, Any]]) -> paramiko.SSHConfig:
    """An SSHConfig holding `blocks` (shared, never changed: lookup copies what it reads)."""
    config = paramiko.SSHConfig()
    config._config = blocks  # type: ignore[attr-defined]  # no public way: see FleetSSHConfig
    return config
