"""Stage names (defined once) and the event every stage emits; report/ reads these."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, WithJsonSchema

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "STAGE_ORDER",
    "Event",
    "EventKind",
    "EventSink",
    "HostRecorder",
    "StageRecord",
]

EVENT_SCHEMA_VERSION = 1


class Stage(StrEnum):
    """Every stage name an event may carry, in push order; defined here only.

    A push runs gate..prune (gate: the patchset's local gate on the controller; baseline
    and canary: the serving gate measuring the old server, then comparing the new one with
    it; unlock: the host lock released, also on a failure path); rollback and recover put
    a backup back; status and check read a host, history its journal's deploys; summary
    is every host's last event
    (`info`), after any undo. The `gate` command's comparison reports under canary.
    input is a command refused before any host (bad input, exit 2): one event, host "".
    """

    INPUT = "input"
    GATE = "gate"
    CONNECT = "connect"
    PREFLIGHT = "preflight"
    BACKUP = "backup"
    JOURNAL = "journal"
    BASELINE = "baseline"
    INSTALL = "install"
    COMPILE = "compile"
    SMOKE = "smoke"
    REFERENCE = "reference"
    DRAIN = "drain"
    RESTART = "restart"
    HEALTH = "health"
    VERIFY = "verify"
    CANARY = "canary"
    READMIT = "readmit"
    COMMIT = "commit"
    UNLOCK = "unlock"
    PRUNE = "prune"
    ROLLBACK = "rollback"
    RECOVER = "recover"
    STATUS = "status"
    CHECK = "check"
    HISTORY = "history"
    SUMMARY = "summary"


STAGE_ORDER: tuple[str, ...] = tuple(stage.value for stage in Stage)

# Event.stage's JSON Schema: the names, as `event`'s are shown (not Stage's docstring).
_STAGE_SCHEMA = {"enum": list(STAGE_ORDER), "title": "Stage", "type": "string"}

EventKind = Literal["start", "ok", "fail", "skip", "info"]


class Event(BaseModel):
    """One JSON Lines record: what happened to one host at one stage."""

    schema_version: int = EVENT_SCHEMA_VERSION
    ts: str
    run_id: str
    host: str
    stage: Annotated[Stage, WithJsonSchema(_STAGE_SCHEMA)]
    event: EventKind
    duration_s: float | None = None
    message: str = ""
    data: dict[str, Any] | None = None


EventSink = Callable[[Event], None]
# The `data` of an event: machine-readable details for CI (see docs/ci.md), or none.
EventData = dict[str, Any] | None


@dataclass
class StageRecord:
    """A finished stage of one host, kept for summaries and JUnit."""

    stage: Stage
    ok: bool
    skipped: bool
    duration_s: float
    message: str


@dataclass
class HostRecorder:
    """Emits a host's events and remembers each stage's outcome."""

    host: str
    run_id: str
    sink: EventSink
    records: list[StageRecord] = field(default_factory=list)
    _started: dict[Stage, float] = field(default_factory=dict)

    def _emit(
        self,
        stage: Stage,
        kind: EventKind,
        message: str = "",
        duration_s: float | None = None,
        data: EventData = None,
    ) -> None:
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        self.sink(
            Event(
                ts=now,
                run_id=self.run_id,
                host=self.host,
                stage=stage,
                event=kind,
                duration_s=None if duration_s is None else round(duration_s, 4),
                message=message,
                data=data,
            )
        )

    def start(self, stage: Stage, message: str = "") -> None:
        self._started[stage] = time.monotonic()
        self._emit(stage, "start", message)

    def _finish(
        self,
        stage: Stage,
        ok: bool,
        skipped: bool,
        message: str,
        duration_s: float | None,
        data: EventData,
    ) -> None:
        if duration_s is None:
            duration_s = time.monotonic() - self._started.pop(stage, time.monotonic())
        self.records.append(StageRecord(stage, ok, skipped, round(duration_s, 4), message))
        kind: EventKind = "skip" if skipped else ("ok" if ok else "fail")
        self._emit(stage, kind, message, duration_s=duration_s, data=data)

    def ok(
        self,
        stage: Stage,
        message: str = "",
        duration_s: float | None = None,
        data: EventData = None,
    ) -> None:
        self._finish(stage, True, False, message, duration_s, data)

    def fail(
        self, stage: Stage, message: str, duration_s: float | None = None, data: EventData = None
    ) -> None:
        self._finish(stage, False, False, message, duration_s, data)

    def skip(self, stage: Stage, message: str = "") -> None:
        self._finish(stage, True, True, message, 0.0, None)

    def info(self, stage: Stage, message: str, data: EventData = None) -> None:
        self._emit(stage, "info", message, data=data)
