"""A TEST STAND-IN for systemd's `systemctl` and `journalctl` on sandbox hosts; it is not systemd.

The sandbox container cannot run systemd for its hosts (no systemd as PID 1 there, and one
booted in a private namespace would clean the shared /tmp), so hosts whose service is
``kind = "systemd"`` get this instead: ``bin/systemctl`` and ``bin/journalctl`` (first on the
PATH sshd gives the agent) run this file with the host's python. It is stdlib only, copied
onto the host with its two siblings (``systemd_unitfile.py``: unit files;
``systemd_journal.py``: the journal and ``journalctl``), as ``sglang_stub.py`` is.

What it keeps of systemd (the subset ddtree-deploy's agent uses, same syntax and output):

- Unit files ``units/NAME.service``: ``[Service]`` Type=simple|exec, ExecStart= (``$VAR``
  split on whitespace, ``${VAR}`` one word, quotes, ``%n %N %i %%``), Environment=,
  EnvironmentFile= (``-`` prefix: may be missing), WorkingDirectory=, Restart=
  no|on-failure|always, RestartSec=, TimeoutStopSec=; ``[Unit]`` StartLimitBurst=,
  StartLimitIntervalSec=. Other keys are ignored (systemd warns and ignores them too).
- One supervisor process per started unit (``supervise NAME``): it runs ExecStart in a
  process group of its own, copies its stdout/stderr line by line into the unit's journal,
  restarts it per Restart= (counting NRestarts, stopping as ``failed`` after StartLimitBurst
  starts in StartLimitIntervalSec), and on ``stop`` ends the whole group (TERM, then KILL).
- ``systemctl start|stop|restart|is-active|show [-p A,B] [--value] UNIT`` with systemd's
  exit codes (is-active: 0 active, 3 otherwise; unknown unit: 5 for start/stop/restart).
  start/restart return once ExecStart was spawned (Type=simple). A manual start resets
  NRestarts, as systemd's does.
- ``journalctl -u UNIT [-n N] [-o short|cat] [--no-pager] [--show-cursor]
  [--after-cursor=C]``: entries of the unit (its output and the manager's own lines about
  it: "Scheduled restart job, restart counter is at N."), ``-- cursor: ...`` after the last
  shown entry, exit 1 with ``-- No entries --`` when none.

Files (under this file's dir, or $DDTREE_SYSTEMD_STANDIN_ROOT): ``units/``, ``run/NAME.json``
(ActiveState, SubState, NRestarts, MainPID, supervisor pid), ``journal/NAME.log`` (one
entry per line: ``epoch pid identifier<TAB>message``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__:  # imported from the sandbox package
    from ddtree_sandbox.systemd_journal import append_journal, journalctl, manager_says
    from ddtree_sandbox.systemd_unitfile import (
        DEFAULT_STOP_S,
        ROOT,
        UnitError,
        load_unit,
        should_restart,
        start_argv,
        unit_name,
    )
else:  # run as a script (on a host): its siblings beside it are top-level modules
    from systemd_journal import append_journal, journalctl, manager_says
    from systemd_unitfile import (
        DEFAULT_STOP_S,
        ROOT,
        UnitError,
        load_unit,
        should_restart,
        start_argv,
        unit_name,
    )

MARKER = "systemd_standin.py"
SIBLINGS = ("systemd_unitfile.py", "systemd_journal.py")  # copied onto hosts beside it
START_WAIT_S = 10.0
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
SHOW_ORDER = ("MainPID", "NRestarts", "Result", "ActiveState", "SubState", "LoadState")


# --- state ------------------------------------------------------------------------------


def state_path(name: str) -> Path:
    return ROOT / "run" / f"{name}.json"


def read_state(name: str) -> dict:
    try:
        return json.loads(state_path(name).read_text())
    except (OSError, ValueError):
        return {"ActiveState": "inactive", "SubState": "dead", "NRestarts": 0, "MainPID": 0}


def write_state(name: str, **changes: object) -> dict:
    state = {**read_state(name), **changes}
    path = state_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)
    return state


# --- the supervisor ----------------------------------------------------------------------


def supervise(name: str) -> int:
    """Run the unit until it stops for good or `stop` signals this process (SIGTERM)."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    starts: list[float] = []
    restarts = 0
    become_subreaper()
    while True:
        try:
            unit = load_unit(name)
            argv, env = start_argv(unit)
        except UnitError as exc:
            manager_says(name, f"Failed to start: {exc}")
            write_state(name, ActiveState="failed", SubState="failed", MainPID=0,
                        Result="resources", supervisor=0)  # fmt: skip
            return 1
        starts = [t for t in starts if time.monotonic() - t < unit["interval_s"]]
        if len(starts) >= unit["burst"]:
            manager_says(name, "Start request repeated too quickly.")
            manager_says(name, "Failed with result 'start-limit-hit'.")
            write_state(name, ActiveState="failed", SubState="failed", MainPID=0,
                        Result="start-limit-hit", supervisor=0)  # fmt: skip
            return 1
        starts.append(time.monotonic())
        proc = subprocess.Popen(
            argv, env=env, cwd=unit["working_directory"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        write_state(name, ActiveState="active", SubState="running", MainPID=proc.pid,
                    NRestarts=restarts, Result="success", supervisor=os.getpid())  # fmt: skip
        manager_says(name, f"Started {name}.")
        reader = threading.Thread(target=_copy_output, args=(name, proc), daemon=True)
        reader.start()
        code = reap_children(proc.pid)
        while code is None and not stopping.is_set():
            time.sleep(0.05)
            code = reap_children(proc.pid)
        if stopping.is_set():
            end_group(proc.pid, code, unit["stop_s"])
            reader.join(timeout=2)
            manager_says(name, f"Stopped {name}.")
            write_state(name, ActiveState="inactive", SubState="dead", MainPID=0, supervisor=0)
            return 0
        code = end_group(proc.pid, code, unit["stop_s"])  # what the main process left
        reader.join(timeout=2)
        assert code is not None
        how = f"code=exited, status={code}" if code >= 0 else f"code=killed, signal={-code}"
        manager_says(name, f"Main process exited, {how}")
        if not should_restart(unit["restart"], code):
            failed = code != 0
            state = "failed" if failed else "inactive"
            manager_says(name, "Failed with result 'exit-code'." if failed else "Deactivated.")
            write_state(name, ActiveState=state, SubState="failed" if failed else "dead",
                        MainPID=0, Result="exit-code" if failed else "success",
                        supervisor=0)  # fmt: skip
            return 0
        write_state(name, ActiveState="activating", SubState="auto-restart", MainPID=0)
        if stopping.wait(unit["restart_s"]):
            write_state(name, ActiveState="inactive", SubState="dead", supervisor=0)
            return 0
        restarts += 1
        write_state(name, NRestarts=restarts)
        manager_says(name, f"Scheduled restart job, restart counter is at {restarts}.")


def _copy_output(name: str, proc: subprocess.Popen[bytes]) -> None:
    identifier = os.path.basename(proc.args[0]) if isinstance(proc.args, list) else "unit"
    assert proc.stdout is not None
    for raw in proc.stdout:
        append_journal(name, proc.pid, identifier, raw.decode("utf-8", "replace").rstrip("\n"))


def become_subreaper() -> None:
    """Adopt the unit's orphans (what systemd's cgroup tracking gives it): a process the
    main process left behind is reparented here, reaped here, and ended at stop."""
    import ctypes  # stdlib; prctl has no other binding

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_children(main_pid: int) -> int | None:
    """Reap every exited child; return the main process's exit code once it was reaped
    (negative: the signal that ended it), else None."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == main_pid:
            code = os.waitstatus_to_exitcode(status)


def end_group(main_pid: int, code: int | None, stop_s: float) -> int | None:
    """KillMode=control-group, roughly: TERM the main process's group, KILL what is left
    after stop_s; return the main process's exit code."""
    for signum, wait_s in ((signal.SIGTERM, stop_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(main_pid, signum)
        except ProcessLookupError:
            return code
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            reaped = reap_children(main_pid)
            code = code if reaped is None else reaped
            if code is not None and not _group_alive(main_pid):
                return code
            time.sleep(0.02)
    return code


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- systemctl ------------------------------------------------------------------------


def supervisor_pid(name: str) -> int | None:
    """The unit's supervisor pid when it still runs this file, else None."""
    pid = int(read_state(name).get("supervisor") or 0)
    if pid <= 0:
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if stat[stat.rfind(")") + 2 :].split()[0] == "Z" or MARKER.encode() not in cmdline:
        return None
    return pid


def do_stop(name: str) -> int:
    pid = supervisor_pid(name)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + DEFAULT_STOP_S + 10
        while supervisor_pid(name) == pid and time.monotonic() < deadline:
            time.sleep(0.05)
    state = read_state(name)
    if state["ActiveState"] != "failed":
        write_state(name, ActiveState="inactive", SubState="dead", MainPID=0, supervisor=0)
    return 0


def do_start(name: str) -> int:
    if supervisor_pid(name) is not None:
        return 0
    load_unit(name)  # a unit that cannot load fails here, as systemctl's does
    write_state(name, ActiveState="activating", SubState="start", NRestarts=0, MainPID=0,
                supervisor=0, Result="success")  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "supervise", name],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, "DDTREE_SYSTEMD_STANDIN_ROOT": str(ROOT)},
    )  # fmt: skip
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        state = read_state(name)
        if state["ActiveState"] != "activating" or state.get("SubState") == "auto-restart":
            break
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    state = read_state(name)
    if state["ActiveState"] == "failed" and state.get("Result") == "resources":
        print(f"Job for {name} failed.", file=sys.stderr)
        return 1
    return 0


def systemctl(argv: list[str]) -> int:
    """systemctl start|stop|restart|is-active|show ... (see the module docstring)."""
    properties: list[str] = []
    value_only = False
    words: list[str] = []
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in ("-p", "--property"):
            if not rest:
                print(f"option requires an argument -- '{arg}'", file=sys.stderr)
                return 1
            properties += rest.pop(0).split(",")
        elif arg.startswith("--property="):
            properties += arg.partition("=")[2].split(",")
        elif arg.startswith("-p") and len(arg) > 2:
            properties += arg[2:].split(",")
        elif arg == "--value":
            value_only = True
        elif arg == "--":
            words += rest
            rest = []
        elif arg in ("--no-pager", "--quiet", "-q", "--no-block", "--system"):
            continue
        elif arg.startswith("-"):
            print(f"systemctl: unrecognized option '{arg}' (systemd stand-in)", file=sys.stderr)
            return 1
        else:
            words.append(arg)
    if not words:
        print("systemctl: this stand-in needs a verb", file=sys.stderr)
        return 1
    verb, units = words[0], words[1:]
    if verb not in ("start", "stop", "restart", "is-active", "show"):
        print(f"Unknown command verb '{verb}' (systemd stand-in).", file=sys.stderr)
        return 1
    if not units and verb != "show":
        print(f"Too few arguments for {verb}.", file=sys.stderr)
        return 1
    try:
        names = [unit_name(u) for u in units]
    except UnitError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    code = 0
    for name in names:
        try:
            if verb == "is-active":
                state = read_state(name)["ActiveState"]
                print(state)
                code = code or (0 if state == "active" else 3)
            elif verb == "show":
                _show(name, properties, value_only)
            else:
                if verb in ("stop", "restart"):
                    if not (ROOT / "units" / name).is_file():
                        raise UnitError(f"Unit {name} not loaded.")
                    do_stop(name)
                if verb in ("start", "restart"):
                    code = code or do_start(name)
        except UnitError as exc:
            print(f"Failed to {verb} {name}: {exc}", file=sys.stderr)
            code = 5
    return code


def _show(name: str, properties: list[str], value_only: bool) -> None:
    state = read_state(name)
    loaded = (ROOT / "units" / name).is_file()
    values = {
        "MainPID": str(state.get("MainPID", 0)),
        "NRestarts": str(state.get("NRestarts", 0)),
        "Result": str(state.get("Result", "success")),
        "ActiveState": str(state.get("ActiveState", "inactive")),
        "SubState": str(state.get("SubState", "dead")),
        "LoadState": "loaded" if loaded else "not-found",
    }
    wanted = [p for p in properties if p] or list(SHOW_ORDER)
    for key in SHOW_ORDER:  # systemd prints in its own order, not the asked one
        if key in wanted:
            print(values[key] if value_only else f"{key}={values[key]}")


def main(argv: list[str]) -> int:
    tool = os.path.basename(argv[1]) if len(argv) > 1 else ""
    if tool == "systemctl":
        return systemctl(argv[2:])
    if tool == "journalctl":
        return journalctl(argv[2:])
    if tool == "supervise" and len(argv) == 3:
        return supervise(argv[2])
    print(f"usage: {argv[0]} systemctl|journalctl ARGS... | supervise UNIT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
