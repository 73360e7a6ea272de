"""The fault matrix: every push stage x every fault, what must happen, and why some pairs
are n/a. Pure data; tests/faults/test_matrix.py runs the cells against real sshd hosts and
tests/faults/report.py turns a run into docs/reliability.md.

Every cell ends with the same checks: the host's whole site-packages/sglang tree hashes to
`before` or `after` (never anything else), the service answers `status`, the journal holds
no unfinished deploy, the lock is released (or, where `lock_left`, a new push is refused
with exit 4 naming the holder), and the CLI exits with the documented code. Where the run
leaves `installing`/`rollback_failed` in the journal (`recover`), `ddtree-deploy recover`
must restore the host (exit 0) once the fault is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddtree_deploy.events import STAGE_ORDER

# The op (and journal state) a fault is injected at, per stage.
HOLD_AT = {
    "preflight": ("lock_acquire", None),
    "backup": ("backup", None),
    "journal": ("journal", "installing"),
    "install": ("install", None),
    "compile": ("compile", None),
    "smoke": ("smoke", None),
    "restart": ("restart", None),
    "health": ("health", None),
    "commit": ("journal", "committed"),
    "rollback": ("restore", None),
}


# The push stages the matrix covers, in STAGE_ORDER (defined once in ddtree_deploy.events).
STAGES = tuple(stage for stage in STAGE_ORDER if stage in HOLD_AT)
FAULTS = (
    "ssh_cut",
    "disk_full",
    "perm_denied",
    "compile_error",
    "import_error",
    "smoke_failure",
    "service_refuses",
    "never_ready",
    "sigkill",
)
FAULT_TITLES = {
    "ssh_cut": "SSH cut",
    "disk_full": "disk full",
    "perm_denied": "permission denied",
    "compile_error": "compile error",
    "import_error": "import error",
    "smoke_failure": "smoke failure",
    "service_refuses": "service refuses to start",
    "never_ready": "health never ready",
    "sigkill": "controller SIGKILL",
}
FAULT_HOW = {
    "ssh_cut": "the agent is held at the stage's op, then every per-connection sshd process "
    "of the host (children of its sshd pid) is SIGKILLed; the agent is let go once the "
    "controller sends its next request (or exits)",
    "disk_full": "a tmpfs over the state dir (or over sglang/srt/speculative) is filled "
    "to ENOSPC while the agent is held at the stage's op",
    "perm_denied": "`chattr +i` on the directory (or journal file) the stage writes, so "
    "even root gets EPERM, applied while the agent is held at the stage's op",
    "compile_error": "a patchset whose new file has a syntax error, locked elsewhere",
    "import_error": "a patchset that compiles but imports a name that does not exist",
    "smoke_failure": "an installed file is altered while the agent is held at `smoke`, so "
    "the integrity suite fails",
    "service_refuses": "the service's start command exits 1 (once, or on the rollback's start)",
    "never_ready": "the service starts but its health URL answers 503 (short ready timeout)",
    "sigkill": "the agent is held at the stage's op, the controller process is SIGKILLed, "
    "then the agent is let go",
}


@dataclass(frozen=True)
class Cell:
    """One meaningful stage x fault pair and what must come of it."""

    stage: str
    fault: str
    exit: int  # the pushing CLI's exit code (-9 when it is the process killed)
    end: str = "before"  # the sglang tree at the end: "before" or "after" the patchset
    recover: bool = False  # leaves an unfinished deploy: `recover` must restore (exit 0)
    lock_left: bool = False  # the lock stays, explained: a new push exits 4 naming it
    running: bool = True  # the service answers `status` at the end
    default: bool = False  # in `make test` (one cell per stage); the rest are slow
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.stage}-{self.fault}"


def _row(stage: str, **cells: dict) -> list[Cell]:
    return [Cell(stage=stage, fault=fault, **spec) for fault, spec in cells.items()]


CELLS: list[Cell] = [
    *_row(
        "preflight",
        ssh_cut={"exit": 3, "default": True, "note": "unreachable; its lock is released after"},
        disk_full={"exit": 3, "note": "the lock cannot be written; no empty lock file is left"},
        perm_denied={"exit": 3, "note": "the lock cannot be created; nothing changed"},
        sigkill={"exit": -9, "lock_left": True, "note": "lock of a dead run: push says so"},
    ),
    *_row(
        "backup",
        ssh_cut={"exit": 1, "note": "the orphan agent finishes; the rollback waits for it"},
        disk_full={"exit": 1, "default": True, "note": "backup fails: site-packages untouched"},
        perm_denied={"exit": 1, "note": "backup fails: site-packages untouched"},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "journal",
        ssh_cut={"exit": 1},
        disk_full={"exit": 1, "note": "no `installing` line, no install"},
        perm_denied={"exit": 1, "default": True, "note": "journal file immutable: no install"},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "install",
        ssh_cut={"exit": 1, "default": True, "note": "the rollback waits for the orphan install"},
        disk_full={"exit": 1, "note": "nothing written, so the restore needs no space"},
        perm_denied={"exit": 1, "note": "nothing written, so the restore needs no access"},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "compile",
        ssh_cut={"exit": 1},
        disk_full={"exit": 1, "note": "the restore removes the new file first: room enough"},
        perm_denied={"exit": 1, "note": "__pycache__ immutable: .pyc not cleared, harmless"},
        compile_error={"exit": 1, "default": True},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "smoke",
        ssh_cut={"exit": 1},
        disk_full={"exit": 1, "note": "the failed script write frees its blocks"},
        perm_denied={
            "exit": 3,
            "recover": True,
            "note": "state dir immutable: no private dir "
            "for the suites, and the rollback cannot write there either: recover",
        },
        import_error={"exit": 1},
        smoke_failure={"exit": 1, "default": True},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "restart",
        ssh_cut={"exit": 1},
        service_refuses={"exit": 1, "default": True},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "health",
        ssh_cut={"exit": 1},
        import_error={"exit": 1, "note": "the service cannot import the patch"},
        never_ready={"exit": 1, "default": True},
        sigkill={"exit": -9, "recover": True},
    ),
    *_row(
        "commit",
        ssh_cut={"exit": 1, "note": "commit landed unseen; rolled back to be sure"},
        disk_full={"exit": 0, "end": "after", "note": "one journal line fits in its last page"},
        perm_denied={"exit": 3, "recover": True, "note": "journal immutable: recover after"},
        sigkill={"exit": -9, "end": "after", "default": True, "note": "the commit completes"},
    ),
    *_row(
        "rollback",
        ssh_cut={"exit": 3, "note": "the orphan finishes the restore; nothing to recover"},
        disk_full={"exit": 1, "note": "the restore removes the new file first: room enough"},
        perm_denied={"exit": 3, "recover": True, "default": True, "note": "rollback_failed"},
        service_refuses={"exit": 3, "running": False, "note": "files restored, service down"},
        never_ready={"exit": 3, "note": "files restored, service unhealthy"},
        sigkill={"exit": -9},
    ),
]

NOT_APPLICABLE = {
    "compile_error": "a syntax error can only surface at `compile` (py_compile); the local "
    "gate refuses such a patchset before any host when the lock is made here",
    "import_error": "compiles fine, so it surfaces at `smoke` (imports suite) or, without "
    "that suite, when the restarted service imports the patch (`health`)",
    "smoke_failure": "only the smoke stage runs suites",
    "service_refuses": "only `restart` (and the rollback's restart) starts the service",
    "never_ready": "only `health` (and the rollback's health) polls readiness",
    "disk_full": "restart and health write nothing on the host (a service that cannot write "
    "is `service refuses`)",
    "perm_denied": "restart and health write nothing on the host",
}


def cell_ids(default_only: bool = False) -> list[str]:
    return [c.id for c in CELLS if c.default or not default_only]


def na_reason(stage: str, fault: str) -> str | None:
    """Why a stage x fault pair has no cell, or None when it has one."""
    if any(c.stage == stage and c.fault == fault for c in CELLS):
        return None
    return NOT_APPLICABLE.get(fault, "")
