"""A TEST STAND-IN for systemd's `systemctl` and `journalctl` on sandbox hosts; it is not systemd.

The sandbox container cannot run systemd for its hosts (no systemd as PID 1 there, and one
booted in a private namespace would clean the shared /tmp), so hosts whose service is
``kind = "systemd"`` get this instead: ``bin/systemctl`` and ``bin/journalctl`` (first on the
PATH sshd gives the agent) run this file with the host's python. It is stdlib only and
self-contained (copied alone onto the host, like ``sglang_stub.py``).

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

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(os.environ.get("DDTREE_SYSTEMD_STANDIN_ROOT") or Path(__file__).resolve().parent)
MARKER = "systemd_standin.py"
SUPPORTED_TYPES = ("simple", "exec")
RESTART_VALUES = ("no", "on-success", "on-failure", "on-abnormal", "on-abort", "always")
DEFAULT_RESTART_S = 0.1
DEFAULT_STOP_S = 90.0
DEFAULT_BURST = 5
DEFAULT_INTERVAL_S = 10.0
START_WAIT_S = 10.0
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
SHOW_ORDER = ("MainPID", "NRestarts", "Result", "ActiveState", "SubState", "LoadState")


class UnitError(Exception):
    """A unit that cannot be loaded or started; the message is what systemctl prints."""


# --- unit files ------------------------------------------------------------------------


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Return {section: {key: [values in order]}} of a unit file: comments (# ;), blank
    lines and backslash continuations as systemd reads them. An empty assignment resets the
    key's list (``ExecStart=`` then ``ExecStart=...``)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None or "=" not in line:
            raise UnitError(f"cannot parse line {raw!r}")
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if value:
            current.setdefault(key, []).append(value)
        else:
            current[key] = []
    return sections


def split_words(text: str) -> list[str]:
    """Split on whitespace honouring "..." and '...' quotes and backslash escapes."""
    words: list[str] = []
    word, quote, started, i = "", "", False, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            word, started, i = word + text[i + 1], True, i + 2
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                word += char
        elif char in "\"'":
            quote, started = char, True
        elif char.isspace():
            if started:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + char, True
        i += 1
    if quote:
        raise UnitError(f"unbalanced quotes in {text!r}")
    if started:
        words.append(word)
    return words


def read_environment_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines of an EnvironmentFile: comments (# ;) skipped, one pair of
    surrounding quotes stripped, backslash continuations joined."""
    env: dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key] = value
    return env


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_command(words: list[str], env: dict[str, str]) -> list[str]:
    """ExecStart's variable expansion: a word that is exactly ``$VAR`` becomes the value's
    whitespace-separated words (none when unset or empty); ``${VAR}`` (or ``$VAR`` inside
    a longer word) is replaced in place, the word staying one argument; ``$$`` is "$"."""
    argv: list[str] = []
    for word in words:
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv.extend(env.get(whole.group(1), "").split())
            continue
        argv.append(_VAR.sub(lambda m: _value(m, env), word))
    return argv


def _value(match: re.Match[str], env: dict[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    return env.get(match.group(1) or match.group(2), "")


def resolve_specifiers(text: str, unit: str) -> str:
    """Replace %n (unit name), %N (without suffix), %i (instance) and %%; refuse others."""
    stem = unit.rsplit(".", 1)[0]
    instance = stem.partition("@")[2]
    table = {"n": unit, "N": stem, "i": instance, "%": "%"}

    def one(match: re.Match[str]) -> str:
        if match.group(1) not in table:
            raise UnitError(f"failed to resolve specifier %{match.group(1)} in {text!r}")
        return table[match.group(1)]

    return re.sub(r"%(.)", one, text)


def parse_seconds(text: str) -> float:
    """A systemd time span: "5", "5s", "100ms", "1min 30s"; raise UnitError otherwise."""
    units = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "min": 60.0, "m": 60.0, "h": 3600.0}
    total, found = 0.0, False
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip()):
        if unit not in units:
            raise UnitError(f"invalid time span {text!r}")
        total, found = total + float(number) * units[unit], True
    if not found or re.sub(r"[\d.\sa-z]", "", text):
        raise UnitError(f"invalid time span {text!r}")
    return total


def unit_name(name: str) -> str:
    """The full unit name: "sglang" means "sglang.service"."""
    if "/" in name or not name or name.startswith("."):
        raise UnitError(f"Invalid unit name {name!r}")
    return name if "." in name else name + ".service"


def load_unit(name: str) -> dict:
    """Read and check units/NAME; return its settings (argv still unexpanded: the
    environment files are read at every start, as systemd does)."""
    path = ROOT / "units" / name
    if not path.is_file():
        raise UnitError(f"Unit {name} not found.")
    sections = parse_unit(path.read_text(encoding="utf-8"))
    service, unit = sections.get("Service", {}), sections.get("Unit", {})

    def last(table: dict[str, list[str]], key: str, default: str) -> str:
        values = table.get(key) or [default]
        return values[-1]

    kind = last(service, "Type", "simple")
    if kind not in SUPPORTED_TYPES:
        raise UnitError(f"{name}: Type={kind} is not supported by this stand-in")
    exec_start = service.get("ExecStart") or []
    if len(exec_start) != 1:
        raise UnitError(f"{name}: Service has {len(exec_start)} ExecStart= settings, needs one")
    restart = last(service, "Restart", "no")
    if restart not in RESTART_VALUES:
        raise UnitError(f"{name}: invalid Restart={restart}")
    command = exec_start[0].lstrip("-@:+!")
    return {
        "name": name,
        "words": split_words(resolve_specifiers(command, name)),
        "environment": [w for v in service.get("Environment", []) for w in split_words(v)],
        "environment_files": service.get("EnvironmentFile", []),
        "working_directory": last(service, "WorkingDirectory", "/"),
        "restart": restart,
        "restart_s": parse_seconds(last(service, "RestartSec", str(DEFAULT_RESTART_S))),
        "stop_s": parse_seconds(last(service, "TimeoutStopSec", str(DEFAULT_STOP_S))),
        "burst": int(last(unit, "StartLimitBurst", str(DEFAULT_BURST))),
        "interval_s": parse_seconds(last(unit, "StartLimitIntervalSec", str(DEFAULT_INTERVAL_S))),
    }


def start_argv(unit: dict) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of one start: Environment= then EnvironmentFile= (later wins)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for assignment in unit["environment"]:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise UnitError(f"invalid Environment= assignment {assignment!r}")
        env[key] = value
    for entry in unit["environment_files"]:
        optional = entry.startswith("-")
        path = entry.lstrip("-")
        try:
            env.update(read_environment_file(path))
        except OSError as exc:
            if not optional:
                raise UnitError(f"Failed to load environment files: {path}: {exc}") from exc
    argv = expand_command(unit["words"], env)
    if not argv or not argv[0].startswith("/"):
        raise UnitError(f"{unit['name']}: ExecStart= needs an absolute path, got {argv[:1]}")
    return argv, env


def should_restart(policy: str, code: int) -> bool:
    """Whether Restart=`policy` restarts after an exit with `code` (negative: a signal)."""
    clean = code == 0 or code in (-signal.SIGTERM, -signal.SIGHUP, -signal.SIGINT)
    return {
        "no": False,
        "always": True,
        "on-success": clean,
        "on-failure": not clean,
        "on-abnormal": code < 0 and not clean,
        "on-abort": code < 0 and not clean,
    }[policy]


# --- state and journal -----------------------------------------------------------------


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


def journal_path(name: str) -> Path:
    return ROOT / "journal" / f"{name}.log"


def append_journal(name: str, pid: int, identifier: str, message: str) -> None:
    """Append one entry (one write of one line: concurrent writers never interleave)."""
    path = journal_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = message.replace("\n", " ").replace("\r", "")
    line = f"{time.time():.6f} {pid} {identifier}\t{text}\n".encode("utf-8", "replace")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def manager_says(name: str, message: str) -> None:
    """Log a line of the manager about the unit (journalctl -u shows them too)."""
    plain = message.startswith(("Started ", "Stopped "))
    append_journal(name, 1, "systemd", message if plain else f"{name}: {message}")


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


# --- journalctl ------------------------------------------------------------------------


def cursor_of(name: str, index: int) -> str:
    """An opaque cursor in journalctl's shape (s=...;i=...)."""
    seqnum = hashlib.md5(name.encode()).hexdigest()  # a stable id per unit, not a secret
    return f"s={seqnum};i={index:x};b=0;m=0;t=0;x=0"


def _cursor_index(cursor: str) -> int:
    fields = dict(part.partition("=")[::2] for part in cursor.split(";"))
    try:
        return int(fields["i"], 16)
    except (KeyError, ValueError):
        raise UnitError(f"Failed to seek to cursor: Invalid argument ({cursor!r})") from None


def journalctl(argv: list[str]) -> int:
    """journalctl -u UNIT [-n N] [-o short|cat] [--no-pager] [--show-cursor]
    [--after-cursor=C]."""
    units: list[str] = []
    lines: int | None = None
    output, show_cursor, after = "short", False, None
    rest = list(argv)
    try:
        while rest:
            arg = rest.pop(0)
            key, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            needs = ("-u", "--unit", "-n", "--lines", "-o", "--output", "--after-cursor")
            if key in needs and not eq:
                if not rest:
                    raise UnitError(f"option requires an argument -- '{arg}'")
                value = rest.pop(0)
            if key in ("-u", "--unit"):
                units.append(unit_name(value))
            elif key in ("-n", "--lines"):
                lines = int(value)
            elif key in ("-o", "--output"):
                if value not in ("short", "cat"):
                    raise UnitError(f"output mode {value!r} is not in this stand-in")
                output = value
            elif key == "--after-cursor":
                after = _cursor_index(value)
            elif key == "--show-cursor":
                show_cursor = True
            elif key in ("--no-pager", "-q", "--quiet"):
                continue
            else:
                raise UnitError(f"unrecognized option '{arg}' (systemd stand-in)")
    except (UnitError, ValueError) as exc:
        print(f"journalctl: {exc}", file=sys.stderr)
        return 1
    if len(units) != 1:
        print("journalctl: this stand-in reads exactly one -u UNIT", file=sys.stderr)
        return 1
    name = units[0]
    try:
        entries = journal_path(name).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        entries = []
    numbered = list(enumerate(entries, start=1))
    if after is not None:
        numbered = [(i, e) for i, e in numbered if i > after]
    if lines is not None:
        numbered = numbered[-lines:] if lines > 0 else []
    if not numbered:
        if output != "cat":
            print("-- No entries --")
        return 1
    host = socket.gethostname()
    for _, entry in numbered:
        head, _, message = entry.partition("\t")
        stamp, pid, identifier = (head.split(" ", 2) + ["", "", ""])[:3]
        if output == "cat":
            print(message)
        else:
            when = time.strftime("%b %d %H:%M:%S", time.localtime(float(stamp or 0)))
            print(f"{when} {host} {identifier}[{pid}]: {message}")
    if show_cursor:
        print(f"-- cursor: {cursor_of(name, numbered[-1][0])}")
    return 0


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
