"""One host's run: its transport, its recorder, and the result it ends with."""

from __future__ import annotations

import datetime
import getpass
import os
import secrets
import socket
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op
from ddtree_deploy.errors import HostKeyError, TransportError
from ddtree_deploy.events import HostRecorder, StageRecord
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport import Transport


class Outcome(StrEnum):
    """How one host ended; cli/ maps these to exit codes."""

    OK = "ok"
    NO_CHANGES = "no_changes"
    NOT_STARTED = "not_started"
    ROLLED_BACK = "rolled_back"
    REFUSED = "refused"
    NEEDS_ATTENTION = "needs_attention"
    LOCKED = "locked"
    FAILED = "failed"  # a read-only command (smoke, status) found a problem


@dataclass
class HostResult:
    host: str
    outcome: Outcome
    message: str = ""
    deploy_id: str | None = None
    version_now: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    records: list[StageRecord] = field(default_factory=list)


def new_run_id() -> str:
    return secrets.token_hex(6)


def controller_holder() -> str:
    """Who holds a lock: user@controller-host pid N (shown to a blocked second run)."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def holder_is_dead(lock: dict | None) -> bool:
    """True when the lock's holder ran on this controller and its process is gone.

    A holder on another machine cannot be checked from here: it counts as alive.
    """
    if not lock or lock.get("controller") != socket.gethostname() or not lock.get("pid"):
        return False
    try:
        with open(f"/proc/{int(lock['pid'])}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] == "Z"
    except (OSError, ValueError, IndexError):
        return True


def unreachable(run: HostRun, exc: TransportError) -> HostResult:
    """The first contact failed, so nothing changed: a host key that is unknown or CHANGED is
    refused config (exit 2); anything else means the host needs attention (exit 3)."""
    if isinstance(exc, HostKeyError):
        return run.result(Outcome.REFUSED, f"refused: {exc}")
    return run.result(Outcome.NEEDS_ATTENTION, f"unreachable: {exc}")


def new_deploy_id(name: str, version: str) -> str:
    """Sortable by time: UTC stamp first."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{name}-{version}-{secrets.token_hex(3)}"


@dataclass
class HostRun:
    """Sends stage-tagged ops to one host and turns op results into stage events."""

    host: Host
    transport: Transport
    recorder: HostRecorder
    run_id: str

    def call(self, ops: list[tuple[str, Op]]) -> AgentResponse:
        """One round trip; emits start/ok/fail per stage; re-raises TransportError."""
        stages = list(dict.fromkeys(stage for stage, _ in ops))
        for stage in stages:
            self.recorder.start(stage)
        request = AgentRequest(state_dir=self.host.state_dir, ops=[op for _, op in ops])
        try:
            response = self.transport.call(request)
        except TransportError as exc:
            self.recorder.fail(stages[0], str(exc))
            raise
        by_stage: dict[str, list] = {}
        for (stage, _), result in zip(ops, response.results, strict=False):
            by_stage.setdefault(stage, []).append(result)
        for stage in stages:
            results = by_stage.get(stage)
            if not results:
                continue  # never reached: an earlier op failed
            duration = sum(r.duration_s for r in results)
            failed = next((r for r in results if not r.ok), None)
            halted = next((r for r in results if r.halt), None)
            if failed is None:
                note = halted.note or "" if halted is not None else ""
                self.recorder.ok(stage, note, duration_s=duration)
            else:
                self.recorder.fail(stage, failed.error or "failed", duration_s=duration)
        return response

    def result(self, outcome: Outcome, message: str = "", **kw: Any) -> HostResult:
        return HostResult(
            host=self.host.name,
            outcome=outcome,
            message=message,
            records=self.recorder.records,
            **kw,
        )
