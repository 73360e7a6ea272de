"""How one host ended a command: the result model every room shares (cli, fleet, report).

It sits next to events.py so that report/ reads results without importing pipeline/.
`HostDetails` names every key a command records about a host, so a reader's misspelled key
(in `.get` too: pyproject's mypy plugin, devtools/mypy_keys.py) or a writer's wrong type
fails mypy (`make lint`), not a report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from ddtree_deploy.events import StageRecord

if TYPE_CHECKING:  # the host's state records, as the facts op reads them back (types only)
    from ddtree_deploy.agent.host.wire_results import BackupEntry, JournalEntry, LockRecord


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


class GateObserve(TypedDict):
    """--gate observe: the checks that would have stopped the push (nothing rolled back)."""

    would_fail: list[str]
    rolled_back: bool


class GateDetails(TypedDict):
    """The serving gate on one host: its baseline's line (None: none was measured) and
    every check as gate/compare.py's `GateCheck.to_dict()` writes it (JUnit's gate cases)."""

    baseline: str | None
    checks: list[dict[str, Any]]
    observe: NotRequired[GateObserve]


class FailedOp(TypedDict):
    """The op that failed a push's request: its name, code, and data as the host sent it
    (JSON: for smoke, {suites: [...]})."""

    op: str
    code: str | None
    data: Any


class ServePlan(TypedDict):
    """`plan`'s view of the serve file: its flags now (None: no file) and after the push,
    and each flag that changes."""

    now: str | None
    new: str
    changes: list[str]


class HostDetails(TypedDict, total=False):
    """What a command found on one host, beside its outcome: every key any command writes
    (total=False: each command writes its own few). Values that came from the host as
    JSON (a file's facts, a container, a smoke suite's line, a service, a drifted file)
    stay dicts: the agent's records say their keys.

    A key one command writes with one meaning keeps that type everywhere; `files`,
    `serve` and `deploys` mean different things to different commands, so their type is
    the union and a reader checks which it has.
    """

    # stamped on every host: fleet/run.py (summarise, undo), pipeline/context.py
    duration_s: float  # the host's wall time in this run
    wave: str  # the rollout wave it ran in ("" is never stamped)
    group: str  # the restart group it ran as a member of
    warnings: list[str]  # what went wrong beside the work (a journal not rotated)
    become: str  # "ok" (hosts check), or sudo's refusal: password_required, denied, ...
    undo: str  # the message of the rollback that followed a fleet stop
    # hosts check: the facts op's answer (wire_results.Facts as JSON), then the SSH route
    python: str
    executable: str
    hostname: str
    agent_pid: int
    site_packages: str | None
    package_version: str | None  # also plan, status, and a host no version targets
    package_root: str | None  # also plan
    install_kind: str | None  # "wheel" | "editable"; also plan
    state_dir_free_bytes: int
    gpus: list[str]
    lock: LockRecord | None  # also status, and a push's `locked` refusal
    journal_tail: list[JournalEntry]
    pending: list[JournalEntry]  # also status
    backups: list[BackupEntry]  # also status, backups list
    user: str | None  # who the agent runs as ("#UID" without a name)
    locate_error: str
    api_key_error: str
    service_error: str
    container: dict[str, Any]  # ContainerFacts as JSON; also status
    route: list[str]  # each SSH hop, jump hosts first, the host last
    # per path: hosts check, FileFacts as JSON; plan, status and a push's `drift` refusal,
    # its state (new, patched, unchanged, drifted, flags); a failed restore, its state;
    # rollback --dry-run, the files its backup would restore
    files: dict[str, dict[str, Any]] | dict[str, str] | list[str]
    # hosts check: the serve file (ServeFact as JSON, None: no file); plan: ServePlan;
    # status: its redacted flags line (None: no file)
    serve: ServePlan | dict[str, Any] | str | None
    # hosts check: each deploy's latest journal entry; history: how many the journal holds
    deploys: list[JournalEntry] | int
    # status
    deployed: str | None  # the patchset of the last committed deploy
    journal: list[JournalEntry]
    serving: str | None  # the server's flags, summarised
    services: list[dict[str, Any]]  # each ServiceState as JSON
    container_recreated: bool
    # hand edits (each drifted file as agent/host/drift.py describes it): status, restore,
    # rollback/recover --dry-run; drift_saved: where a forced restore saved their bytes
    drift: Sequence[Mapping[str, Any]]
    drift_saved: str
    # a restore that failed: its op's data as the host sent it (RestoreFailure as JSON;
    # None without any); a service that did not come back healthy: its log
    error: dict[str, Any] | None
    log: str
    # rollback, recover and backups prune --dry-run
    dry_run: bool
    deploy_id: str
    patchset: str | None
    created: str | None
    unchecked: list[str]
    removed: list[str]  # also backups prune
    kept: list[str]
    # smoke, push: each suite's result line as the suite printed it (SmokeResult)
    suites: list[dict[str, Any]]
    gate: GateDetails  # push, gate
    failure: FailedOp  # a push rolled back because an op failed
    history: list[dict[str, str]]  # history: each deploy (pipeline/history.py DeployRecord)


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
    details: HostDetails = field(default_factory=HostDetails)
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
