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

    server_url: str = Field(
        default="http://127.0.0.1:30000",
        description="The server the `server` suite and the serving gate talk to, from the host.",
    )
    expected_algorithm: str | None = Field(
        default="DDTREE",
        description="The speculative algorithm /server_info must report; unset: what the "
        "serve flags a push writes say.",
    )
    expected_ddtree_budget: int | None = Field(
        default=None,
        description="The DDTree budget /server_info must report; unset: the serve flags'.",
    )
    min_accept_length: float | None = Field(
        default=None,
        ge=0,
        description="Lowest mean accept length the lossless gate accepts; unset: the "
        "patchset's [lossless] min_accept_length.",
    )
    lossless: bool = Field(
        default=True,
        description="The lossless gate (patchsets with [lossless]); false skips it on this "
        "host, visibly.",
    )
    lossless_prompts: list[LosslessPrompt] | None = Field(
        default=None,
        description="This host's lossless prompts ({ text = ... } or { input_ids = [...] }), "
        "instead of the patchset's.",
    )
    prompt: str = Field(
        default="The capital of France is",
        description="The prompt of the `server` suite's generate check.",
    )
    api_key_file: str | None = Field(
        default=None,
        description="The server's --api-key: an absolute path ON THE HOST whose first line is "
        "the key, read by the agent and never sent to the controller.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="The server's --api-key: the name of a variable of the agent's session "
        "(with become: sudo's environment); not with api_key_file.",
    )
    max_new_tokens: int = Field(
        default=16, ge=1, description="Tokens the `server` suite's generate check asks for."
    )
    timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds one request of the `server` suite may take."
    )
    isolated_imports: bool = Field(
        default=False,
        description="The `imports` suite imports each patched module in a fresh interpreter "
        "instead of a child forked from a warm parent (for hosts where fork is unsafe).",
    )

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

    name: str = Field(description="The host's name: its [hosts.NAME] table's NAME.")
    address: str = Field(
        min_length=1,
        description="Hostname, IP address or ssh_config alias (HostName, User, Port, "
        "ProxyJump... then come from ssh_config).",
    )
    transport: Literal["ssh", "local"] = Field(
        default="ssh", description="ssh, or local: run the agent on this machine (tests)."
    )
    user: str | None = Field(
        default=None,
        description="SSH login user; unset: ~/.ssh/config's User, else the local user.",
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="SSH port; unset: ~/.ssh/config's Port, else 22.",
    )
    jump: str | None = Field(
        default=None,
        description="Jump host(s): an inventory host name or [user@]host[:port]; "
        '"a,b" chains (ProxyJump form). Every hop\'s key is checked.',
    )
    jump_hosts: tuple[Host, ...] = Field(
        default=(),
        description="The inventory hosts `jump` reaches: set by the loader, never written in "
        "an inventory; the transport builds the hop chain from them.",
    )
    keepalive_s: float = Field(
        default=15.0, ge=0, description="SSH keepalive interval on every hop; 0 turns it off."
    )
    keepalive_count: int = Field(
        default=3,
        ge=1,
        description="Unanswered keepalives before a hop counts as lost (ServerAliveCountMax): "
        "a silent link gives up after keepalive_count x keepalive_s.",
    )
    python: str = Field(
        default="/usr/bin/python3",
        description="The host's interpreter that runs SGLang (in a container: the "
        "container's); it runs the agent.",
    )
    identity_file: str | None = Field(
        default=None,
        description="SSH private key, tried before ssh_config's IdentityFile entries (the "
        "ssh-agent too, unless IdentitiesOnly).",
    )
    known_hosts: str | None = Field(
        default=None,
        description="A known_hosts file checked on every hop, with ~/.ssh/known_hosts and "
        "/etc/ssh/ssh_known_hosts; unknown or changed keys are refused (exit 2).",
    )
    become: Literal["sudo"] | None = Field(
        default=None,
        description='"sudo": run the agent (and so every service command) as become_user '
        "through `sudo -n` (never a password prompt).",
    )
    become_user: str = Field(
        default="root", description='The user `become` runs the agent as: a name or "#UID".'
    )
    container: str | None = Field(
        default=None,
        pattern=CONTAINER_NAME,
        description="The agent runs inside this container (`RUNTIME exec -i NAME PYTHON`); "
        "python is then the container's.",
    )
    container_runtime: Literal["docker", "podman"] = Field(
        default="docker", description="The runtime of `container`."
    )
    host_python: str = Field(
        default="/usr/bin/python3",
        description="With `container`: the host's own python (3.8+), which runs the "
        "container's inspect and restart and relays requests into the container.",
    )
    state_dir: str = Field(
        default=DEFAULT_STATE_DIR,
        description="Backups, journal and lock on the host (0700); with `container`, put it "
        "on a volume.",
    )
    groups: tuple[str, ...] = Field(
        default=(), description="Group names this host is in (`-g NAME`, [groups.NAME])."
    )
    gpus: int = Field(
        default=0,
        ge=0,
        description="GPUs the host declares: 0 skips the `gpu` smoke suite; more fails it "
        "where CUDA is not usable.",
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="Seconds to open each SSH hop."
    )
    services: tuple[ServiceSpec, ...] = Field(  # before `service`: its errors name services.N
        default=(),
        description="[[hosts.NAME.services]]: several servers of one env (one per GPU), "
        "restarted in this order; each merges over [defaults.service].",
    )
    service: ServiceSpec = Field(
        default=ServiceSpec(),
        description="The host's one server ([service]); with `services`, the first of them "
        "(the one the serving gate and the after-restart suites measure).",
    )
    stagger_s: float | None = Field(
        default=None,
        ge=0,
        description="Between several services' restarts: unset waits for each to answer "
        "health before the next; N starts the next N seconds after the last, then polls every "
        "health.",
    )
    hooks: HooksSpec = Field(
        default=HooksSpec(), description="Controller commands around the restart."
    )
    smoke: SmokeSpec = Field(default=SmokeSpec(), description="Smoke suite settings.")
    serve: ServeOverrides = Field(
        default=ServeOverrides(),
        description="This host's server flags and env, merged over the patchset's [serve].",
    )
    gate: GateConfig | None = Field(
        default=None,
        description="The serving gate: [defaults.gate] < [groups.G.gate] (in the host's "
        "group order) < [hosts.NAME.gate], key by key, over the patchset's [gate].",
    )
    gate_prompts: tuple[dict[str, object], ...] = Field(
        default=(),
        description="The prompts of gate.prompts (a JSONL file relative to the inventory), "
        "read at load: set by the loader.",
    )

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

    name: str = Field(description="The group's name: its [groups.NAME] table's NAME.")
    members: tuple[str, ...] = Field(
        min_length=2,
        description="Inventory hosts serving one server, each with a systemd or command "
        "service; they change and restart as one.",
    )
    leader: str = Field(
        description="The member that is rank 0: health, verify and the serving gate run there."
    )
    restart: Literal["together"] = Field(
        default="together", description="How members restart: together (the only way)."
    )
    start_order: Literal["workers_first", "leader_first"] = Field(
        default="workers_first",
        description="leader_first for servers whose workers connect to a listening leader.",
    )

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
