"""Run one fault-matrix cell against a real sshd host and return what happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_deploy.patchset import load_patchset
from tests.faults.hostside import SPECULATIVE, STATE_DIR, FaultHost
from tests.faults.matrix import HOLD_AT, Cell
from tests.support import REPO, make_patchset, run_cli, utils_file

CLI_TIMEOUT_S = 240


@dataclass
class Push:
    """A `push --json` running in the background, its events read by a thread."""

    proc: subprocess.Popen
    events: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, inventory: Path, patchsets: Path, *select: str) -> Push:
        """`select`: the hosts to push (default -H host0)."""
        argv = [sys.executable, "-m", "ddtree_deploy", "push", *(select or ("-H", "host0")),
                "-i", str(inventory), "--patchsets-dir", str(patchsets), "--json"]  # fmt: skip
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        push = cls(proc)
        threading.Thread(target=push._read, daemon=True).start()
        return push

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def wait_next_request_or_exit(self, after: int, timeout_s: float = 120.0) -> None:
        """Until a stage starts after event index `after`, or the CLI exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(e["event"] == "start" for e in self.events[after:]):
                return
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=CLI_TIMEOUT_S)
        return self.proc.returncode, err


def patchsets_for(cell: Cell, root: Path) -> Path:
    """The patchset variant a cell pushes (fast suites; broken where the fault needs it)."""
    if cell.fault == "compile_error" or (
        cell.stage == "rollback" and cell.fault not in ("service_refuses", "never_ready")
    ):
        dirs = make_patchset(root, suites=["integrity"])
        broken = dirs / "ddtree" / "1.0.0"
        utils_file(broken).write_text(utils_file(broken).read_text() + "\ndef broken(:\n")
        relock_without_compiling(broken)
        return dirs
    if cell.fault == "import_error":
        suites = ["imports"] if cell.stage == "smoke" else ["integrity"]
        return make_patchset(root, suites=suites, mutate=_bad_import)
    return make_patchset(root, suites=["integrity"])


def _bad_import(root: Path) -> None:
    path = utils_file(root)
    path.write_text(
        path.read_text() + "\nfrom sglang.srt.speculative.spec_info import NoSuchName\n"
    )


def relock_without_compiling(root: Path) -> None:
    """Re-hash one source in the lock without the local compile check (a lock made
    elsewhere), so a patchset that does not compile reaches the host."""
    from ddtree_deploy.agent import sha256_bytes

    lock_path = root / "patchset.lock.json"
    lock = json.loads(lock_path.read_text())
    entry = lock["files"]["sglang/srt/speculative/ddtree_utils.py"]
    entry["source_sha256"] = entry["result_sha256"] = sha256_bytes(utils_file(root).read_bytes())
    lock_path.write_text(json.dumps(lock))


def expected_after(before: dict[str, str], patchsets: Path) -> dict[str, str]:
    after = dict(before)
    lock = load_patchset(patchsets / "ddtree" / "1.0.0").lock
    for path, f in lock.files.items():
        after[path.removeprefix("sglang/")] = f.result_sha256
    return after


def _prepare(fh: FaultHost, cell: Cell) -> None:
    """Mounts and start plans a cell needs before the push starts."""
    state_faults = {"preflight", "backup", "journal", "smoke", "commit"}
    if cell.fault == "disk_full":
        target = STATE_DIR if cell.stage in state_faults else SPECULATIVE
        fh.tmpfs_over(target, "4m" if target == STATE_DIR else "24m")
        if cell.stage == "preflight":
            fh.fill(STATE_DIR)
    if cell.fault == "perm_denied" and cell.stage == "preflight":
        fh.make_immutable(STATE_DIR)
    if cell.fault == "perm_denied" and cell.stage == "journal":
        fh.host.run(["touch", f"{STATE_DIR}/journal.jsonl"])
        fh.host.run(["chmod", "600", f"{STATE_DIR}/journal.jsonl"])
    plans = {
        ("restart", "service_refuses"): ("fail", "ok"),
        ("health", "never_ready"): ("never_ready", "ok"),
        ("rollback", "service_refuses"): ("never_ready", "fail"),
        ("rollback", "never_ready"): ("never_ready", "never_ready"),
    }
    fh.plan_starts(*plans.get((cell.stage, cell.fault), ()))


def _strike(fh: FaultHost, cell: Cell, push: Push) -> None:
    """Apply the cell's fault while the agent is held, then let the agent go."""
    fault, stage = cell.fault, cell.stage
    if fault == "ssh_cut":
        seen = len(push.events)
        assert fh.cut_ssh() > 0, "no sshd session to cut"
        push.wait_next_request_or_exit(seen)
    elif fault == "sigkill":
        os.kill(push.proc.pid, signal.SIGKILL)
        push.proc.wait()
    elif fault == "disk_full":
        state_faults = {"backup", "journal", "smoke", "commit"}
        fh.fill(STATE_DIR if stage in state_faults else SPECULATIVE)
    elif fault == "perm_denied":
        target = {
            "backup": f"{STATE_DIR}/backups",
            "journal": f"{STATE_DIR}/journal.jsonl",
            "commit": f"{STATE_DIR}/journal.jsonl",
            # the suites run from a fresh private dir made in the state dir (ops_smoke)
            "smoke": STATE_DIR,
            "compile": f"{SPECULATIVE}/__pycache__",
        }.get(stage, SPECULATIVE)
        fh.make_immutable(target)
    elif fault == "smoke_failure":
        fh.tamper("sglang/srt/speculative/spec_info.py")
    fh.release()


def _held(cell: Cell) -> bool:
    return cell.fault in ("ssh_cut", "sigkill", "disk_full", "perm_denied", "smoke_failure") and (
        cell.stage != "preflight" or cell.fault in ("ssh_cut", "sigkill")
    )


@dataclass
class CellRun:
    exit: int
    stderr: str
    before: dict[str, str]
    expected: dict[str, str]
    digest: dict[str, str]
    journal_after_push: list[dict]
    journal: list[dict]
    lock: dict | None
    running: bool
    recover_exit: int | None = None
    locked_push: str = ""


def run_cell(fh: FaultHost, cell: Cell, workdir: Path) -> CellRun:
    patchsets = patchsets_for(cell, workdir / "ps")
    _prepare(fh, cell)
    fh.start_service()
    before = fh.digest()
    expected = before if cell.end == "before" else expected_after(before, patchsets)
    if _held(cell):
        fh.hold_at(*HOLD_AT[cell.stage])
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    if _held(cell):
        fh.wait_paused(push.proc)
        _strike(fh, cell, push)
    code, err = push.finish()
    fh.wait_agents_gone()
    fh.clear_faults()
    journal_after_push = fh.journal()
    run = CellRun(code, err, before, expected, {}, journal_after_push, [], None, False)
    inv = str(fh.sandbox.inventory_path)
    if cell.recover:
        done = run_cli("recover", "-H", "host0", "-i", inv, timeout=CLI_TIMEOUT_S)
        run.recover_exit, run.stderr = done.returncode, run.stderr + done.stderr
    if cell.lock_left:
        again = run_cli(
            "push", "-H", "host0", "-i", inv, "--patchsets-dir", str(patchsets), "--no-restart"
        )
        run.locked_push = f"exit {again.returncode}: {again.stderr}"
    run.digest, run.journal, run.lock = fh.digest(), fh.journal(), fh.lock()
    run.running = fh.service_running()
    return run
