"""Typed answers of the ops that take the lock, write the journal, restore and prune, and
the data of their refusals. Stdlib only; as in wire_results.py, the agent builds them and
sends `to_dict()` (the same keys the plain dicts had), the controller reads them back with
`from_dict()` (`OpResult.data_as`, `AgentResponse.result_as`).
"""

from typing import Any, Dict, List, Optional

from .record import Record
from .wire_results import LockRecord


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

    drift: List[Dict[str, Any]]


class RestoreFailure(Record):
    """The data of `restore_failed`: every file's state ("restored" or why not), the
    hand edits found and where their bytes were saved (None: not saved)."""

    files: Dict[str, str]
    drift: List[Dict[str, Any]]
    drift_saved: Optional[str]


class Restored(Record):
    """restore: every file back ("restored") from `backup` (its directory on the host), the
    hand edits found (restored over only with force; their bytes saved in drift_saved), and
    `unchecked`: the files whose hand edits could not be checked."""

    files: Dict[str, str]
    backup: str
    drift: List[Dict[str, Any]]
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
