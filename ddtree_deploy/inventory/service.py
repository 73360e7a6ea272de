"""The inventory's service tables: how a host's SGLang servers restart, are health-checked
and watched while they start ([service] / [[services]]), the load balancer they leave while
they restart (drain) and the controller's hooks around it; the strict base of every
inventory model."""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_HEALTH_URL = "http://127.0.0.1:30000/health_generate"
# The start-up watchdog's defaults (service.fail_patterns / progress_patterns), read from
# real sglang 0.5.13.post1 and 0.5.23 logs. A Python traceback is NOT a fail pattern: both
# log non-fatal ones while starting ("Can not initialize OpenAIServingResponses, error:
# Traceback", and a bare "Traceback (most recent call last):" after "post-warmup freeze_gc
# failed"), and the server comes up healthy.
DEFAULT_FAIL_PATTERNS = (
    r"Scheduler hit an exception",
    r"Received sigquit from a child process",
    r"CUDA out of memory",
    r"torch\.OutOfMemoryError",
)
DEFAULT_PROGRESS_PATTERNS = (
    r"Load weight end",
    r"Capture cuda graph end",
    r"The server is fired up and ready to roll",
)
# A service's name in events and status (a systemd unit name fits: sglang@0.service).
SERVICE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$"
# A systemd unit name (systemd.unit(5): ASCII letters, digits, ":-_.\\" and "@", at most 255),
# never starting with "-": it is an argument of systemctl/journalctl, not an option.
UNIT_NAME = r"^[A-Za-z0-9_:\\][A-Za-z0-9_.@:\\-]{0,254}$"


class Strict(BaseModel):
    """Unknown keys are errors; a loaded inventory never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def http_url(value: str, key: str) -> str:
    """`value` when it is an http(s) URL; raises ValueError naming `key` otherwise."""
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{key} must be http(s)://, got {value!r}")
    return value


class DrainSpec(Strict):
    """Take a server out of a load balancer while it restarts: the SGLang router's
    `POST /remove_worker?url=WORKER` before the restart, `POST /add_worker?url=WORKER` once
    the new server passed every gate (or the rollback's server its health check).

    Between the remove and the stop, the controller polls `metrics_url` (default
    WORKER/metrics, sglang's --enable-metrics) until `sglang:num_running_reqs` is 0, for at
    most timeout_s; a server that exports no such gauge gets grace_s instead.
    """

    router: str = Field(description="The router's URL (its /remove_worker, /add_worker).")
    worker_url: str = Field(description="This server's URL as the router knows it.")
    metrics_url: str | None = Field(
        default=None, description="Where sglang:num_running_reqs is read; unset: WORKER/metrics."
    )
    timeout_s: float = Field(
        default=120.0, gt=0, description="Longest wait for 0 running requests, in seconds."
    )
    grace_s: float = Field(
        default=5.0, ge=0, description="The wait instead, for a server without the gauge."
    )

    @field_validator("router", "worker_url", "metrics_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value, "the URL").rstrip("/")


class HooksSpec(Strict):
    """Commands the CONTROLLER runs around a host's restart (no shell: shlex-split), with
    DDTREE_HOST, DDTREE_DEPLOY_ID and DDTREE_STAGE set: pre_restart before the first service
    stops (failing: the push stops, files restored, the server never restarted: exit 1),
    post_verify after the last gate passed, on_rollback after a rollback (failing after a
    restart: the host needs attention, exit 3)."""

    pre_restart: str | None = Field(
        default=None,
        description="Before the first service stops; failing stops the push (files restored, "
        "exit 1).",
    )
    post_verify: str | None = Field(default=None, description="After the last gate passed.")
    on_rollback: str | None = Field(
        default=None,
        description="After a rollback; failing after a restart: exit 3 (needs attention).",
    )
    timeout_s: float = Field(default=300.0, gt=0, description="Seconds each hook may run.")

    @field_validator("pre_restart", "post_verify", "on_rollback")
    @classmethod
    def _splits(cls, value: str | None) -> str | None:
        return split_check(value)


def split_check(value: str | None) -> str | None:
    """A command string shlex can split into a non-empty argv (or None)."""
    if value is not None:
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split command {value!r}: {exc}") from exc
        if not argv:
            raise ValueError("command is empty")
    return value


class ServiceSpec(Strict):
    """How the host's SGLang server is restarted and health-checked.

    Command strings are split with shlex and executed without a shell, so shell
    metacharacters in them are plain argument text.
    """

    kind: Literal["systemd", "command", "container", "none"] = Field(
        default="none",
        description="systemd (systemctl), command (start/stop/status scripts), container "
        "(`RUNTIME restart NAME` on the host, health polled inside the container) or none "
        "(never restarted).",
    )
    name: str | None = Field(
        default=None,
        pattern=SERVICE_NAME,
        description="How events and `status` name it; unset: its unit, else service "
        "(service<N> among several).",
    )
    unit: str | None = Field(default=None, description="kind systemd: the unit to restart.")
    start: str | None = Field(
        default=None, description="kind command: the start command (shlex-split, no shell)."
    )
    stop: str | None = Field(default=None, description="kind command: the stop command.")
    status: str | None = Field(
        default=None,
        description="kind command: exits 0 while the server runs; a worker's liveness.",
    )
    log_file: str | None = Field(
        default=None,
        description="The server's log: read by the start-up watchdog, its tail shown on "
        "failures (systemd: the journal is read instead).",
    )
    args_file: str | None = Field(
        default=None,
        description='The serve file: a systemd EnvironmentFile (SGLANG_ARGS="..." plus env '
        "lines) the service reads at start; a push of a patchset with [serve] writes it, a "
        "rollback restores it. Required for such patchsets.",
    )
    health_url: str = Field(
        default=DEFAULT_HEALTH_URL, description="Polled after a start until it answers 200."
    )
    ready_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="Longest health wait after a start (big models take minutes to load).",
    )
    poll_interval_s: float = Field(
        default=1.0,
        gt=0,
        description="The longest wait between health polls (from 5 ms, doubling).",
    )
    fail_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FAIL_PATTERNS),
        description="Start-up watchdog: a log line matching one (Python regexes) ends the "
        "health wait at once.",
    )
    progress_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PROGRESS_PATTERNS),
        description="A log line matching one becomes an info event with its time.",
    )
    kill_leftovers: bool = Field(
        default=False,
        description="A restart finds processes of the stopped instance still holding the "
        "health port (or orphaned sglang:: processes): true SIGTERMs them (SIGKILL after "
        "10 s), false refuses to start.",
    )
    drain: DrainSpec | None = Field(
        default=None,
        description="Out of the load balancer while it restarts (the SGLang router's worker "
        "API): { router = ..., worker_url = ... }.",
    )
    role: Literal["leader", "worker"] | None = Field(
        default=None,
        description="worker: a non-zero rank of a multi-node server, no health endpoint: its "
        "liveness is its status (systemd: is-active). leader or unset: health-checked.",
    )

    @field_validator("start", "stop", "status")
    @classmethod
    def _splits(cls, value: str | None) -> str | None:
        return split_check(value)

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str | None) -> str | None:
        if value is not None and not re.match(UNIT_NAME, value):
            raise ValueError(
                "must be a systemd unit name (letters, digits and ':-_.@\\', at most 255, "
                f"not starting with '-'), got {value!r}"
            )
        return value

    @field_validator("args_file")
    @classmethod
    def _args_file(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.startswith("/") or "/../" in value + "/" or "\x00" in value:
                raise ValueError(f"must be an absolute path without '..', got {value!r}")
        return value

    @field_validator("fail_patterns", "progress_patterns")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern:
                raise ValueError("an empty pattern matches every line")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {pattern!r}: {exc}") from exc
        return value

    @field_validator("health_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value, "health_url")

    @model_validator(mode="after")
    def _kind_fields(self) -> ServiceSpec:
        if self.kind == "systemd" and not self.unit:
            raise ValueError("kind = 'systemd' needs 'unit'")
        if self.kind == "command" and not (self.start and self.stop):
            raise ValueError("kind = 'command' needs 'start' and 'stop'")
        if self.role == "worker" and self.kind == "command" and not self.status:
            raise ValueError("role = 'worker' has no health endpoint: its liveness needs 'status'")
        if self.role is not None and self.kind == "none":
            raise ValueError("'role' needs a service kind (systemd, command or container)")
        return self

    @property
    def health_checked(self) -> bool:
        """Whether its start is followed by a health wait (not a worker rank)."""
        return self.role != "worker"

    def label(self, position: int | None = None) -> str:
        """The service's name: `name`, else its unit, else service<position> ("service"
        for a host's only service)."""
        return self.name or self.unit or f"service{'' if position is None else position}"

    def argv(self, action: Literal["start", "stop", "status"]) -> list[str] | None:
        """The argv for a `command` service action, or None when not configured."""
        value = getattr(self, action)
        return shlex.split(value) if value else None
