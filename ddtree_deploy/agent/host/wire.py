"""The agent protocol both sides share: framing, result codes and typed op records.

Stdlib only (the host's python may be as old as 3.8): the controller's pydantic envelope
(`agent/protocol.py`) and the host's ops both use these names, so a code or an argument
cannot be spelled two ways.

A result is one of three things:
- ok: the op did its work; the next op runs.
- halt: the op did its work and found that nothing further is needed (`Code.NO_CHANGES`):
  later ops are skipped and the request still succeeds. Mitogen's CallChain cancels the
  rest of a chain the same way, without calling it an error.
- failed: the op could not do its work; later ops are skipped; `code` says why.

Every op's arguments are one record below (`OP_ARGS` maps its OpName to it), and the
results the controller reads as data have one too (`wire_results.py`). `from_dict` is
strict: an unknown or missing key is a `WireError` naming the op and the key.
"""

from enum import Enum
from typing import Any, Dict, List, Optional, Tuple, Type

from .record import Record as Record
from .record import WireError as WireError

# Re-exported (`X as X`): Record and WireError are part of this protocol.
from .record import field
from .wire_capture import EditsArgs as EditsArgs
from .wire_service import GateArgs as GateArgs
from .wire_service import HealthArgs as HealthArgs
from .wire_service import RestartArgs as RestartArgs
from .wire_service import Service as Service
from .wire_service import ServicesArgs as ServicesArgs
from .wire_service import SmokeArgs as SmokeArgs
from .wire_service import SmokeSuite as SmokeSuite

BEGIN, END = "<<<DDTREE-AGENT-BEGIN>>>", "<<<DDTREE-AGENT-END>>>"  # frame an answer


class Code(str, Enum):
    """Why an op halted or failed. A str Enum: it compares equal to its JSON value."""

    NO_CHANGES = "no_changes"  # halt, ok
    # refusals before anything changed (preflight)
    LOCKED = "locked"
    PENDING_RECOVERY = "pending_recovery"
    VERSION_MISMATCH = "version_mismatch"
    DRIFT = "drift"
    UNSAFE_PATH = "unsafe_path"
    STATE_DIR_UNWRITABLE = "state_dir_unwritable"
    PACKAGE_NOT_FOUND = "package_not_found"  # installed, but not importable where it says
    API_KEY_UNREADABLE = "api_key_unreadable"  # smoke.api_key_file/env gives no key
    SERVICE_NOT_FOUND = "service_not_found"  # a systemd unit the host does not know
    EDITABLE_INSTALL = "editable_install"  # edits: an editable install's RECORD lists no files
    # failures while changing the host
    BACKUP_CORRUPT = "backup_corrupt"
    PATCH_FAILED = "patch_failed"
    RESULT_MISMATCH = "result_mismatch"
    VERIFY_FAILED = "verify_failed"
    COMPILE_FAILED = "compile_failed"
    SMOKE_FAILED = "smoke_failed"
    # the service
    RESTART_FAILED = "restart_failed"
    UNHEALTHY = "unhealthy"
    # restore
    NO_BACKUP = "no_backup"
    BACKUP_UNREADABLE = "backup_unreadable"
    RESTORE_FAILED = "restore_failed"
    # a request the agent cannot read (a controller bug): unknown op, unknown/missing key
    BAD_ARGS = "bad_args"
    # anything the op did not expect: a bug or a broken host, with its traceback as data
    EXCEPTION = "exception"


class _Name(str, Enum):
    """A str Enum that equals, hashes and formats as its JSON value (python 3.8 and on)."""

    def __str__(self):
        return str(self.value)

    def __format__(self, spec):
        return format(str(self.value), spec)


class OpName(_Name):
    """The ops an agent runs: an op's "op" in a request and in its answer."""

    FACTS = "facts"
    CHECK_PLAN = "check_plan"
    LOCK_ACQUIRE = "lock_acquire"
    LOCK_RELEASE = "lock_release"
    JOURNAL = "journal"
    BACKUP = "backup"
    INSTALL = "install"
    COMPILE = "compile"
    RESTORE = "restore"
    DRIFT = "drift"
    RESTART = "restart"
    HEALTH = "health"
    SERVICES = "services"
    SMOKE = "smoke"
    PRUNE = "prune"
    GATE_MEASURE = "gate_measure"
    EDITS = "edits"
    HISTORY = "history"


class JournalState(_Name):
    """A deploy's state in the host's journal (an entry's "state"), the last entry's counts."""

    INSTALLING = "installing"  # files may be changing: unfinished, for `recover`
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    ROLLBACK_FAILED = "rollback_failed"  # unfinished, for `recover`
    CORRUPT = "corrupt"  # read back for a line that is no JSON; never written


class OpFailed(Exception):
    """An expected failure of one op: `code` (a Code) says why, `data` travels back."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.data = Code(code), data or {}


class OpHalt(OpFailed):
    """The op succeeded and nothing further is needed: later ops are skipped, the request
    stays ok."""


# --- op arguments ---------------------------------------------------------------------


class FileSpec(Record):
    """One patchset file: where it goes (relative to the package root: site-packages for a
    wheel, the source tree for an editable install) and its sha256s.

    A patch carries `diff` (unified diff text), a new file `content_b64`; check_plan gets
    neither. `upgrade_sha256`: results of other locked versions, so an upgrade is no drift.
    """

    OMIT_IF_NONE = ("diff", "content_b64")
    path: str
    result_sha256: str
    base_sha256: Optional[str] = None
    upgrade_sha256: Tuple[str, ...] = ()
    diff: Optional[str] = None
    content_b64: Optional[str] = None


class ServeSpec(Record):
    """The serve file a push writes: absolute path, sha256 of the new bytes, the bytes
    (base64; None where the op only compares hashes)."""

    path: str
    sha256: Optional[str]
    content_b64: Optional[str] = None


class FactsArgs(Record):
    """facts: the package to look up, the paths to hash, the serve file to read, and where
    the server's API key is (a file or an environment variable: checked, never sent back),
    and the systemd units whose existence to check."""

    paths: List[str] = field(default_factory=list)
    package: str = "sglang"
    serve_path: Optional[str] = None
    journal_lines: int = 5
    api_key_file: Optional[str] = None
    api_key_env: Optional[str] = None
    # the host's systemd units (kind = "systemd" services): each must be known to systemd
    units: List[str] = field(default_factory=list)


class CheckPlanArgs(Record):
    """check_plan: what a push would change, judged against the facts op's answer."""

    NESTED = (("files", FileSpec, "list"), ("serve", ServeSpec, "one"))
    package: str
    target_version: Optional[str]
    files: List[FileSpec]
    run_id: Optional[str] = None
    break_lock: bool = False
    serve: Optional[ServeSpec] = None


class LockAcquireArgs(Record):
    """lock_acquire: who takes the host lock (run, holder text, pid and controller host)
    and for how long (ttl_s, seconds)."""

    run_id: str
    holder: str
    pid: Optional[int] = None
    controller: Optional[str] = None
    ttl_s: float = 3600.0
    break_lock: bool = False


class LockReleaseArgs(Record):
    """lock_release: the run whose lock to drop (another run's lock is left alone)."""

    run_id: str


class JournalArgs(Record):
    """journal: one entry to append (deploy_id, state and free-form fields)."""

    entry: Dict[str, Any]


class BackupArgs(Record):
    """backup: the files (relative to site_packages, the package root facts found) and
    serve file to copy aside; results: path (or the serve file's path) -> the sha256 the
    install writes, kept in the manifest so a later restore can tell a hand edit."""

    deploy_id: str
    site_packages: str
    paths: List[str]
    patchset: Optional[str] = None
    serve_path: Optional[str] = None
    results: Dict[str, str] = field(default_factory=dict)


class InstallArgs(Record):
    """install: the files to write; with deploy_id its backup is re-verified first."""

    NESTED = (("files", FileSpec, "list"), ("serve", ServeSpec, "one"))
    site_packages: str
    files: List[FileSpec]
    serve: Optional[ServeSpec] = None
    deploy_id: Optional[str] = None


class CompileArgs(Record):
    """compile: the .py files (relative to site_packages) to byte-compile."""

    site_packages: str
    paths: List[str]


class RestoreArgs(Record):
    """restore: the deploy whose backup to put back; force: also over hand-edited files
    (their bytes saved beside the backup first); the package whose root the backup's
    site_packages must be, and the inventory's serve file (None: the host has none), which
    the agent holds a manifest to before writing (restore_check.py)."""

    deploy_id: str
    force: bool = False
    package: str = "sglang"
    serve_path: Optional[str] = None


class DriftArgs(Record):
    """drift: the deploy whose files to check for hand edits (None: the one the host
    should be at: the newest unfinished, else the newest committed)."""

    deploy_id: Optional[str] = None


class HistoryArgs(Record):
    """history: how many deploys to return (the most recently started ones)."""

    deploys: int = 20


class PruneArgs(Record):
    """prune: how many backups to keep."""

    keep: int = 5


OP_ARGS: Dict[OpName, Type[Record]] = {
    OpName.FACTS: FactsArgs,
    OpName.CHECK_PLAN: CheckPlanArgs,
    OpName.LOCK_ACQUIRE: LockAcquireArgs,
    OpName.LOCK_RELEASE: LockReleaseArgs,
    OpName.JOURNAL: JournalArgs,
    OpName.BACKUP: BackupArgs,
    OpName.INSTALL: InstallArgs,
    OpName.COMPILE: CompileArgs,
    OpName.RESTORE: RestoreArgs,
    OpName.DRIFT: DriftArgs,
    OpName.RESTART: RestartArgs,
    OpName.HEALTH: HealthArgs,
    OpName.SERVICES: ServicesArgs,
    OpName.SMOKE: SmokeArgs,
    OpName.PRUNE: PruneArgs,
    OpName.GATE_MEASURE: GateArgs,
    OpName.EDITS: EditsArgs,
    OpName.HISTORY: HistoryArgs,
}

OP_NAME = {record: op for op, record in OP_ARGS.items()}


def parse_args(op: str, raw: Any) -> Record:
    """Return the typed arguments of op `op` (a name or an OpName) from its JSON object;
    raises WireError naming the op and the key (unknown op, unknown key, missing key)."""
    if op not in OP_ARGS:
        raise WireError("unknown op %r" % (str(op),))
    return OP_ARGS[OpName(op)].from_dict(raw, "op %r args" % str(op))
