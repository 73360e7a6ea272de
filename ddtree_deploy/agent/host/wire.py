"""The agent protocol both sides share: framing sentinels and result codes, defined once.

Stdlib only (the host's python may be as old as 3.8): the controller's pydantic envelope
(`agent/protocol.py`) and the host's ops both use these names, so a code cannot be spelled
two ways.

A result is one of three things:
- ok: the op did its work; the next op runs.
- halt: the op did its work and found that nothing further is needed (`Code.NO_CHANGES`):
  later ops are skipped and the request still succeeds. Mitogen's CallChain cancels the
  rest of a chain the same way, without calling it an error.
- failed: the op could not do its work; later ops are skipped; `code` says why.
"""

from enum import Enum

BEGIN = "<<<DDTREE-AGENT-BEGIN>>>"
END = "<<<DDTREE-AGENT-END>>>"


class Code(str, Enum):
    """Why an op halted or failed. A str Enum: it compares equal to its JSON value."""

    # halt, ok
    NO_CHANGES = "no_changes"
    # refusals before anything changed (preflight)
    LOCKED = "locked"
    PENDING_RECOVERY = "pending_recovery"
    VERSION_MISMATCH = "version_mismatch"
    DRIFT = "drift"
    UNSAFE_PATH = "unsafe_path"
    STATE_DIR_UNWRITABLE = "state_dir_unwritable"
    # failures while changing the host
    BACKUP_CORRUPT = "backup_corrupt"
    PATCH_FAILED = "patch_failed"
    RESULT_MISMATCH = "result_mismatch"
    VERIFY_FAILED = "verify_failed"
    COMPILE_FAILED = "compile_failed"
    SMOKE_FAILED = "smoke_failed"
    # restore
    NO_BACKUP = "no_backup"
    BACKUP_UNREADABLE = "backup_unreadable"
    RESTORE_FAILED = "restore_failed"
    # anything the op did not expect: a bug or a broken host, with its traceback as data
    EXCEPTION = "exception"
