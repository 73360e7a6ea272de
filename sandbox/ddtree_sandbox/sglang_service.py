"""Start, stop and report a REAL SGLang server (`python -m sglang.launch_server`) on a sandbox
host: the `command` service of the sandbox inventories.

Copied into each sandbox host as ``/srv/service/sglang_service.py`` and run by the host's
python, so it is stdlib only. Usage: ``python sglang_service.py start|stop|status``.

The server's arguments and environment come from the serve file beside it, ``sglang.env``
(the inventory's ``service.args_file``): ``SGLANG_ARGS="--model-path ... --port ..."`` plus
``KEY="value"`` lines, the same file a systemd unit reads with ``EnvironmentFile=`` and
``ExecStart=... $SGLANG_ARGS``. ddtree-deploy rewrites it when a patchset needs other flags
and restores it on rollback; this script only reads it, at every start.

Files beside it: ``server.pid`` (the launch_server pid, also its process group: sglang's
scheduler and detokenizer processes share it), ``server.log``, ``tmp/`` (the server's
TMPDIR: sglang leaves IPC files there, so each start gets it emptied).

Exit codes: ``status`` 0 running, 3 stopped; ``start``/``stop`` 0 on success, 1 on failure.

It is deliberately self-contained (it is copied alone onto the host, like an operator's own
start script): the serve-file reading repeats ``stages/serve_file.parse_serve_file`` and the
pid handling repeats ``sglang_stub.py``'s rather than importing either.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SERVICE_DIR = Path(__file__).resolve().parent
SERVE_FILE = SERVICE_DIR / "sglang.env"
PID_FILE = SERVICE_DIR / "server.pid"
LOG_FILE = SERVICE_DIR / "server.log"
TMP_DIR = SERVICE_DIR / "tmp"
MARKER = "sglang.launch_server"
ARGS_KEY = "SGLANG_ARGS"
START_CHECK_S = 1.0  # a server that dies this soon (bad flag, import error) fails `start`
STOP_TIMEOUT_S = 20.0


def read_serve_file(path: Path = SERVE_FILE) -> tuple[list[str], dict[str, str]]:
    """Return (launch_server arguments, environment) from the serve file.

    Same reading as systemd's EnvironmentFile for what ddtree-deploy writes: KEY=value per
    line, one pair of surrounding quotes stripped, comments and blank lines skipped; the
    value of SGLANG_ARGS is split on whitespace (as ``$SGLANG_ARGS`` in ExecStart).
    """
    args: list[str] = []
    env: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key == ARGS_KEY:
            args = value.split()
        else:
            env[key] = value
    return args, env


def proc_stat(pid: int) -> tuple[str, int] | None:
    """Return (state, process group) of ``pid`` from /proc, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[2])


def group_members(pgid: int) -> list[int]:
    """Return the live (non-zombie) pids whose process group is ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] == pgid and stat[0] != "Z":
                members.append(int(entry))
    return members


def running_pid() -> int | None:
    """The server's pid when the pid file names a live launch_server, else None."""
    try:
        pid = int(PID_FILE.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError, IndexError):
        return None
    stat = proc_stat(pid)
    alive = stat is not None and stat[0] != "Z"
    return pid if alive and MARKER in cmdline else None


def cmd_start() -> int:
    """Launch the server detached in its own process group; fail if it dies at once."""
    if running_pid() is not None:
        print(f"already running, pid {running_pid()}")
        return 0
    try:
        args, env = read_serve_file()
    except OSError as exc:
        print(f"cannot read the serve file: {exc}", file=sys.stderr)
        return 1
    if not args:
        print(f"{SERVE_FILE}: no {ARGS_KEY} line", file=sys.stderr)
        return 1
    shutil.rmtree(TMP_DIR, ignore_errors=True)
    TMP_DIR.mkdir(mode=0o700)
    environ = {**os.environ, **env, "TMPDIR": str(TMP_DIR), "PYTHONUNBUFFERED": "1"}
    with open(LOG_FILE, "ab") as log_file:
        log_file.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(args)}\n".encode())
        log_file.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", MARKER, *args],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(SERVICE_DIR),
            env=environ,
        )
    PID_FILE.write_text(f"{proc.pid}\n")
    try:
        code = proc.wait(timeout=START_CHECK_S)
    except subprocess.TimeoutExpired:
        print(f"started, pid {proc.pid}")
        return 0
    PID_FILE.unlink(missing_ok=True)
    print(f"server exited at once with code {code}; see {LOG_FILE}", file=sys.stderr)
    return 1


def cmd_stop() -> int:
    """SIGTERM the server's process group, wait, SIGKILL what is left; 0 when none runs."""
    pid = running_pid()
    if pid is None:
        PID_FILE.unlink(missing_ok=True)
        print("not running")
        return 0
    for signum, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and group_members(pid):
            time.sleep(0.1)
        if not group_members(pid):
            break
    left = group_members(pid)
    if left:
        print(f"processes {left} of server {pid} did not stop", file=sys.stderr)
        return 1
    PID_FILE.unlink(missing_ok=True)
    print(f"stopped pid {pid}")
    return 0


def cmd_status() -> int:
    pid = running_pid()
    print(f"running, pid {pid}" if pid is not None else "stopped")
    return 0 if pid is not None else 3


def main(argv: list[str]) -> int:
    commands = {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}
    if len(argv) != 2 or argv[1] not in commands:
        print(f"usage: {argv[0]} {{start|stop|status}}", file=sys.stderr)
        return 2
    return commands[argv[1]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
