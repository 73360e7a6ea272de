"""How one host ended a command: the result model every room shares (cli, fleet, report).

It sits next to events.py so that report/ reads results without importing pipeline/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ddtree_deploy.events import StageRecord


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


@dataclass(frozen=True)
class HostResult:
    """One host's end: its outcome, a message for people, and what the command found.

    Frozen: derive a changed copy with `dataclasses.replace`. `records` is the host
    recorder's list of finished stages (it still grows while an undo runs on the host).
    """

    host: str
    outcome: Outcome
    message: str = ""
    deploy_id: str | None = None
    version_now: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    records: list[StageRecord] = field(default_factory=list)

    @property
    def shown_message(self) -> str:
        """The message, then what went wrong beside the work (details["warnings"], e.g. a
        host journal that could not be rotated): what a summary row and event show."""
        warnings = self.details.get("warnings") or []
        if not warnings:
            return self.message
        shown = f"warning: {'; '.join(warnings)}"
        return f"{self.message} ({shown})" if self.message else shown
