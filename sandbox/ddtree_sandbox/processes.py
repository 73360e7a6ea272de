"""Find, wait for and stop the sandbox's own processes by pid file, never by name."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def read_pid_file(pid_file: Path) -> int | None:
    """Return the pid stored in ``pid_file``, or None if it is missing or unreadable."""
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_running(pid: int) -> bool:
    """Return True if ``pid`` exists and is not a zombie (``kill -0`` alone says yes to those)."""
    state = _proc_state(pid)
    return state is not None and state != "Z"


def read_cmdline(pid: int) -> str:
    """Return the process's command line with NULs as spaces, or "" if it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def find_children(pid: int) -> list[int]:
    """Return the pids of every live descendant of ``pid`` (depth first, children first)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read_stat(int(entry.name))
        if stat is not None:
            parents.setdefault(stat[1], []).append(int(entry.name))
    found: list[int] = []
    stack = list(parents.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(parents.get(child, []))
    return found


def stop_pid(pid: int, timeout_s: float = 5.0) -> bool:
    """SIGTERM ``pid``, wait up to ``timeout_s``, then SIGKILL; return True once it is gone."""
    if not is_running(pid):
        _reap(pid)
        return True
    _signal(pid, signal.SIGTERM)
    if wait_for_exit(pid, timeout_s):
        return True
    _signal(pid, signal.SIGKILL)
    return wait_for_exit(pid, 2.0)


def stop_pid_file(pid_file: Path, cmdline_marker: str, timeout_s: float = 5.0) -> bool:
    """Stop the process named by ``pid_file`` if its cmdline holds ``cmdline_marker``.

    The marker check keeps a stale pid file from killing an unrelated process that reused the
    pid. Returns True if nothing of ours is left running; the pid file is removed then.
    """
    pid = read_pid_file(pid_file)
    if pid is None:
        return True
    if is_running(pid) and cmdline_marker not in read_cmdline(pid):
        pid_file.unlink(missing_ok=True)
        return True
    stopped = stop_pid(pid, timeout_s)
    if stopped:
        pid_file.unlink(missing_ok=True)
    return stopped


def wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Poll until ``pid`` is gone or a zombie; reap it if it is our child. Return True if so."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_running(pid):
            _reap(pid)
            return True
        time.sleep(0.02)
    return False


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _proc_state(pid: int) -> str | None:
    stat = _read_stat(pid)
    return None if stat is None else stat[0]


def _read_stat(pid: int) -> tuple[str, int] | None:
    """Return ``(state, ppid)`` from /proc/PID/stat, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name sits in parentheses and may hold spaces; fields resume after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[1])
