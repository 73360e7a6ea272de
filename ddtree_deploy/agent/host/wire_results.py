"""Typed results of the ops whose data the controller reads: facts, check_plan, backup,
smoke. Stdlib only; the agent builds them and sends `to_dict()`, the controller reads them
back with `from_dict()` (see `OpResult.result_as` in agent/protocol.py)."""

import dataclasses
from typing import Any, Dict, List, Optional

from .record import Record


@dataclasses.dataclass(frozen=True)
class ServeFound(Record):
    """The serve file as found: its sha256 and text (both None when absent; `error` when
    it could not be read)."""

    OMIT_IF_NONE = ("error",)
    path: str
    sha256: Optional[str]
    text: Optional[str]
    error: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class FileFacts(Record):
    """One patched path on the host: sha256 now, sha256 in the dist's RECORD, and why it
    is unsafe (a symlink leading out of site-packages), if it is."""

    OMIT_IF_NONE = ("unsafe",)
    sha256: Optional[str]
    record_sha256: Optional[str]
    unsafe: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Facts(Record):
    """What the facts op found on the host.

    site_packages/package_version are None when the package is not installed;
    state_dir_free_bytes is the free space (bytes) of the filesystem holding the state dir;
    lock is the lock record or None; journal_tail/deploys/pending/backups are journal
    entries and backup listings as dicts.
    """

    NESTED = (("serve", ServeFound, "one"), ("files", FileFacts, "map"))
    serve: Optional[ServeFound]
    python: str
    executable: str
    hostname: str
    agent_pid: int
    site_packages: Optional[str]
    package_version: Optional[str]
    files: Dict[str, FileFacts]
    state_dir_free_bytes: int
    gpus: List[str]
    lock: Optional[Dict[str, Any]]
    journal_tail: List[Dict[str, Any]]
    deploys: List[Dict[str, Any]]
    pending: List[Dict[str, Any]]
    backups: List[Dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class PlanResult(Record):
    """check_plan's verdict per path: unchanged, pending, upgrade or drifted."""

    files: Dict[str, str]


@dataclasses.dataclass(frozen=True)
class BackupResult(Record):
    """Where the backup is (a directory on the host) and how many files it covers."""

    backup: str
    files: int


@dataclasses.dataclass(frozen=True)
class SmokeResult(Record):
    """Each suite's result line as the suite printed it (suite, passed, skipped, details,
    checks, duration_s, ...): free-form, so kept as dicts."""

    suites: List[Dict[str, Any]]

    def failed(self):
        """Return the results of the suites that neither passed nor were skipped."""
        return [r for r in self.suites if not r.get("passed") and not r.get("skipped")]
