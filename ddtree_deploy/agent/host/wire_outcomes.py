"""Typed answers of the ops that take the lock, write the journal, install, compile,
check for hand edits, restore, prune, restart and check health, and the data of their
refusals and failures. Stdlib only; as in wire_results.py, the agent builds them and sends
`to_dict()` (the same keys, in the same order, as the plain dicts they replaced), the
controller reads them back with `from_dict()` (`OpResult.data_as`, `AgentResponse.result_as`).

An answer with several shapes (restart: skipped, stopped or restarted) is one record whose
fields are None where a shape has no key (`OMIT_IF_NONE`): the bytes stay those of the dict.
"""

from typing import Any, Dict, List, Optional, TypedDict

from .record import Record
from .wire_container import ContainerFacts
from .wire_results import LockRecord


class DriftedFile(TypedDict):
    """One hand-edited file (drift.find_drift): its key in the backup (a path relative to
    the package root, or "serve"), the sha256 the deploy wrote, the one found now (None:
    deleted) and the original's (None: the file was new)."""

    file: str
    expected_sha256: Optional[str]
    found_sha256: Optional[str]
    original_sha256: Optional[str]


class LeftoverProcess(TypedDict, total=False):
    """A process a stopped server left behind (service_watch.find_leftovers): why it is in
    the way (listening on the health port, an orphaned sglang:: process) and, when
    nvidia-smi lists it, the GPU memory it holds (MiB)."""

    pid: int
    cmdline: str
    why: str
    gpu_mib: int


class ProgressMark(TypedDict):
    """A service log line that matched a progress pattern while the server started, and
    its time since the start (seconds)."""

    after_s: float
    pattern: str
    line: str


class LockTaken(Record):
    """lock_acquire: the lock record now on the host (`replaced`: the expired or broken
    lock it took over); `reentered` only when this run held it already."""

    OMIT_IF_NONE = ("reentered",)
    lock: LockRecord
    reentered: Optional[bool] = None


class LockRefusal(Record):
    """The data of a `locked` refusal (check_plan, lock_acquire): the lock that stood in the
    way (None when it could not be read back)."""

    lock: Optional[LockRecord]


class LockReleased(Record):
    """lock_release: whether this run's lock was dropped; else the lock left in place
    (another run's, or None when there was none)."""

    OMIT_IF_NONE = ("lock",)
    released: bool
    lock: Optional[LockRecord] = None


class JournalAppended(Record):
    """journal: the entry appended (the agent adds ts), and the rotation that came first:
    entries carried into the new journal, or None; why it failed, or None."""

    entry: Dict[str, Any]  # a JournalEntry, with the fields the controller added
    rotated: Optional[int]
    rotate_error: Optional[str]


class Pruned(Record):
    """prune: the deploy ids whose backups were removed and those kept."""

    removed: List[str]
    kept: List[str]


class DriftRefusal(Record):
    """The data of a restore refused for hand edits (`drift`), or of one whose drifted
    bytes could not be saved (`state_dir_unwritable`): each drifted file, as drift.py
    describes it."""

    drift: List[DriftedFile]


class InstallResult(Record):
    """install: the files written (paths relative to the package root), in order."""

    installed: List[str]


class CompileResult(Record):
    """compile: how many .py files were byte-compiled."""

    compiled: int


class DriftResult(Record):
    """drift: the deploy checked (None: the host has none to be at), its hand-edited files,
    the files that could not be checked (a backup older than the check), why its backup
    could not be read (None: it was), and every file a restore of it puts back."""

    deploy_id: Optional[str]
    drift: List[DriftedFile]
    unchecked: List[str]
    error: Optional[str]
    files: List[str]


class RestoreFailure(Record):
    """The data of `restore_failed`: every file's state ("restored" or why not), the
    hand edits found and where their bytes were saved (None: not saved)."""

    files: Dict[str, str]
    drift: List[DriftedFile]
    drift_saved: Optional[str]


class Restored(Record):
    """restore: every file back ("restored") from `backup` (its directory on the host), the
    hand edits found (restored over only with force; their bytes saved in drift_saved), and
    `unchecked`: the files whose hand edits could not be checked."""

    files: Dict[str, str]
    backup: str
    drift: List[DriftedFile]
    drift_saved: Optional[str]
    unchecked: List[str]


class ServiceState(Record):
    """One service as the services op found it: running True/False as its status command
    (exit 0) or `systemctl is-active` says, None when it has no way to tell (no status
    command, a container); health: "HTTP 200", "HTTP 503", or why nothing answered."""

    name: str
    kind: str
    running: Optional[bool]
    health: str


class ServicesResult(Record):
    """services: each of the host's services, in inventory order."""

    NESTED = (("services", ServiceState, "list"),)
    services: List[ServiceState]


class RestartResult(Record):
    """restart, one of: `skipped` (a service of kind "none"); `stopped` (action "stop");
    `restarted` (restart or start), with the clean-start check's note on the GPU and the
    leftover processes it ended (None: none); a `container` service's restart carries the
    container as inspected after it instead (relay.py). `service`: the service's name."""

    NESTED = (("container", ContainerFacts, "one"),)
    OMIT_IF_NONE = (
        "skipped", "stopped", "restarted", "service", "leftovers_ended", "gpu", "container",
    )  # fmt: skip
    skipped: Optional[bool] = None
    stopped: Optional[bool] = None
    restarted: Optional[bool] = None
    service: Optional[str] = None
    leftovers_ended: Optional[List[LeftoverProcess]] = None
    gpu: Optional[str] = None
    container: Optional[ContainerFacts] = None


class HealthResult(Record):
    """health, one of: `skipped` (a service of kind "none"), or `healthy` after `polls`
    polls, with the progress lines the start-up watchdog saw, for service `service`."""

    OMIT_IF_NONE = ("skipped", "healthy", "polls", "progress", "service")
    skipped: Optional[bool] = None
    healthy: Optional[bool] = None
    polls: Optional[int] = None
    progress: Optional[List[ProgressMark]] = None
    service: Optional[str] = None


class ServiceFailure(Record):
    """The data of `restart_failed` and `unhealthy`: the failed command's output, the
    service's (or container's) last log lines, the watchdog's progress so far, the
    service's name; for a clean start refused, the leftover processes and the GPU note.
    Each is None where that failure has nothing to say (and then left out)."""

    OMIT_IF_NONE = ("output", "log", "progress", "service", "leftovers", "gpu")
    output: Optional[str] = None
    log: Optional[str] = None
    progress: Optional[List[ProgressMark]] = None
    service: Optional[str] = None
    leftovers: Optional[List[LeftoverProcess]] = None
    gpu: Optional[str] = None
