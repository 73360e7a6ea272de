"""Pydantic models of a host inventory; unknown keys and bad values are errors."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ddtree_deploy.gate.settings import GateConfig
from ddtree_deploy.inventory.service import (
    HooksSpec,
    ServiceSpec,
    Strict,
)
from ddtree_deploy.patchset.models import LosslessPrompt, ServeConfig

DEFAULT_STATE_DIR = "/var/lib/ddtree-deploy"
# become_user: a POSIX-style login name (useradd's rule, upper case allowed, 32 chars) or
# sudo's "#UID" form; it is passed to `sudo -u` as one argument, so it never starts with "-".
USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|#[0-9]{1,10}")
# Docker's and podman's container names (or an id): no leading '-', so never an option.
CONTAINER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


class ServeOverrides(ServeConfig):
    """This host's server arguments and environment (model path, port, draft model...).

    Same form and checks as a patchset's [serve]; merged with it: a flag or env name given
    here replaces the patchset's, and the rest of the patchset's is added after these.
    """


class SmokeSpec(Strict):
    """Settings of the smoke suites for one host (most of them: the `server` suite's).

    Unset expected_algorithm/expected_ddtree_budget are read from the serve flags a push
    writes; unset min_accept_length comes from the patchset's [lossless].
    """

    server_url: str = "http://127.0.0.1:30000"
    expected_algorithm: str | None = "DDTREE"
    expected_ddtree_budget: int | None = None
    min_accept_length: float | None = Field(default=None, ge=0)
    # The lossless gate (patchsets with [lossless]): false skips it on this host, visibly.
    lossless: bool = True
    lossless_prompts: list[LosslessPrompt] | None = None
    prompt: str = "The capital of France is"
    # The server's --api-key, read ON THE HOST by the agent (never sent to the controller):
    # a file path (first line) or the name of an environment variable of the agent.
    api_key_file: str | None = None
    api_key_env: str | None = None
    max_new_tokens: int = Field(default=16, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    # The `imports` suite imports each patched module in a fresh interpreter of its own
    # instead of a child forked from a warm parent (for hosts where fork is unsafe).
    isolated_imports: bool = False

    @field_validator("api_key_file")
    @classmethod
    def _key_file(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or "\x00" in value or "\n" in value):
            raise ValueError(f"must be an absolute path on the host, got {value!r}")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"must be an environment variable name, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> SmokeSpec:
        if self.api_key_file and self.api_key_env:
            raise ValueError("give api_key_file or api_key_env, not both")
        return self


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Host(Strict):
    """One deploy target, with defaults already merged in."""

    name: str
    address: str = Field(min_length=1)
    transport: Literal["ssh", "local"] = "ssh"
    # Unset user/port: ~/.ssh/config's User/Port win, else the local user and 22 (as ssh).
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    # Jump host(s): an inventory host name or [user@]host[:port]; "a,b" chains (ProxyJump form).
    jump: str | None = None
    # The inventory hosts that `jump` reaches (their own jump_hosts empty): set by the loader,
    # never written in an inventory; the transport builds the hop chain from them.
    jump_hosts: tuple[Host, ...] = ()
    keepalive_s: float = Field(default=15.0, ge=0)  # SSH keepalive; 0 turns it off
    # Unanswered keepalives (keepalive_s apart) before the host counts as lost (OpenSSH's
    # ServerAliveCountMax): a silent link gives up after keepalive_count × keepalive_s.
    keepalive_count: int = Field(default=3, ge=1)
    python: str = "/usr/bin/python3"
    identity_file: str | None = None
    known_hosts: str | None = None
    # Run the agent (and so every service command) as become_user through `sudo -n`.
    become: Literal["sudo"] | None = None
    become_user: str = "root"
    # The agent runs inside this container (`RUNTIME exec -i NAME PYTHON`); python is the
    # container's. The host's own python (host_python) runs the host side: the container's
    # inspect and restart, and the relay into the container (transport/launch.py).
    container: str | None = Field(default=None, pattern=CONTAINER_NAME)
    container_runtime: Literal["docker", "podman"] = "docker"
    host_python: str = "/usr/bin/python3"
    state_dir: str = DEFAULT_STATE_DIR
    groups: tuple[str, ...] = ()
    gpus: int = Field(default=0, ge=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    # The host's server: `service` (one), or `services` (several servers of one env, e.g. one
    # per GPU), restarted in this order; `service` is then the first of them (the one the
    # serving gate and the after-restart suites measure through smoke.server_url).
    services: tuple[ServiceSpec, ...] = ()  # before `service`: its errors name services.N
    service: ServiceSpec = ServiceSpec()
    # Between two of several services' restarts: None waits for each to answer health
    # before restarting the next (servers that load weights at the same time choke, and
    # share GPU memory); a number of seconds starts the next that long after the last and
    # polls every health after the last start.
    stagger_s: float | None = Field(default=None, ge=0)
    hooks: HooksSpec = HooksSpec()
    smoke: SmokeSpec = SmokeSpec()
    serve: ServeOverrides = ServeOverrides()
    # The serving gate for this host: [defaults.gate] < [groups.G.gate] (in the host's group
    # order) < [hosts.NAME.gate], merged key by key; over the patchset's [gate].
    gate: GateConfig | None = None
    # The prompts of gate.prompts (a JSONL file, relative to the inventory), read at load.
    gate_prompts: tuple[dict[str, object], ...] = ()

    @field_validator("python", "host_python", "state_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path, got {value!r}")
        if "\x00" in value or "\n" in value:
            raise ValueError("must not contain NUL or newline")
        return value

    @field_validator("become_user")
    @classmethod
    def _user_name(cls, value: str) -> str:
        if not USER_NAME.fullmatch(value):
            raise ValueError(f"must be a user name (or #UID), got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _first_service(cls, data: Any) -> Any:
        """With `services`, `service` is the first of them; giving both is an error."""
        if isinstance(data, dict) and data.get("services"):
            if "service" in data:
                raise ValueError("give one [service] table or [[services]] tables, not both")
            data = {**data, "service": data["services"][0]}
        return data

    @model_validator(mode="after")
    def _container_service(self) -> Host:
        if self.service.kind == "container" and not self.container:
            raise ValueError("service kind = 'container' needs the host's 'container'")
        return self

    @model_validator(mode="after")
    def _several_services(self) -> Host:
        """Several services: all restartable, no container, unique names, one serve file."""
        if len(self.services) < 2:
            return self
        for spec in self.services:
            if spec.kind in ("none", "container"):
                raise ValueError(
                    f"services: kind = {spec.kind!r} cannot be one of several services "
                    "(a container host's one service restarts its container)"
                )
        names = [name for _, name in self.named_services()]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"services: two services are named {twice[0]!r} (set 'name')")
        files = sorted({str(spec.args_file) for spec in self.services})
        if len(files) > 1:  # "None" among them: a service that reads no serve file
            raise ValueError(
                "services: the servers of one env read one serve file (one [serve] per "
                f"host): give each the same args_file, got {files[0]!r} and {files[1]!r}"
            )
        return self

    def named_services(self) -> tuple[tuple[ServiceSpec, str], ...]:
        """The services a restart restarts, in order, each with its name; () for kind none."""
        if len(self.services) > 1:
            return tuple((spec, spec.label(i)) for i, spec in enumerate(self.services, 1))
        return () if self.service.kind == "none" else ((self.service, self.service.label()),)

    @property
    def label(self) -> str:
        """user@address:port as far as the inventory says (ssh_config may fill the rest)."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        where = f"{user}{self.address}{port}"
        return f"{where} [{self.container}]" if self.container else where


class RestartGroup(Strict):
    """Hosts that serve ONE server together (sglang --nnodes N: rank 0 the leader) and so
    must run the same code and restart together: `[groups.NAME]` with `members`.

    A push treats the group as one unit (canary, waves, max-fail): every member through
    smoke, then a barrier; then every member's service stopped, the workers started (in
    member order, liveness by their status), then the leader (health, the after-restart
    suites, the serving gate); any member failing anywhere rolls back every member and
    restarts the group on the old code. start_order "leader_first" starts the leader first
    (for servers whose workers connect to a listening leader).
    """

    name: str
    members: tuple[str, ...] = Field(min_length=2)
    leader: str
    restart: Literal["together"] = "together"
    start_order: Literal["workers_first", "leader_first"] = "workers_first"

    @model_validator(mode="after")
    def _leader_is_member(self) -> RestartGroup:
        if self.leader not in self.members:
            raise ValueError(f"leader {self.leader!r} is not one of members {list(self.members)}")
        if len(set(self.members)) != len(self.members):
            raise ValueError("a host is listed twice in members")
        return self

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(name for name in self.members if name != self.leader)


class Inventory(Strict):
    """Every host of one inventory file, by name, and its restart groups."""

    source: str
    hosts: dict[str, Host]
    restart_groups: dict[str, RestartGroup] = Field(default_factory=dict)

    def restart_group_of(self, host: str) -> RestartGroup | None:
        """The restart group `host` is a member of, if any."""
        return next((g for g in self.restart_groups.values() if host in g.members), None)

    @property
    def groups(self) -> set[str]:
        return {g for h in self.hosts.values() for g in h.groups}
