"""What the agent asks systemd about a `systemd` service while it starts (stdlib only).

The start-up watchdog of a systemd unit: its state (`systemctl show -p ...`: ActiveState,
SubState, Result, NRestarts) and the journal lines the new instance writes (`journalctl -u
UNIT --after-cursor=C -o cat --show-cursor`, from the cursor of the last entry before the
restart). Only options systemd has had since v219 are used; `systemctl show` prints the
properties in its own order, so they are read as KEY=VALUE, never by position.
"""

import subprocess
import time

SYSTEMCTL_TIMEOUT_S = 30
UNIT_CHECK_S = 1.0  # the unit's state is asked at most this often while waiting
CURSOR_PREFIX = "-- cursor: "
STATE_PROPERTIES = ("ActiveState", "SubState", "Result", "NRestarts", "MainPID")
DEAD_STATES = ("failed", "inactive")


def _run(argv):
    """(exit code, stdout) of argv; 127 when missing, 124 when it timed out."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
        return done.returncode, done.stdout
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""


def parse_show(text):
    """{property: value} of `systemctl show` output (KEY=VALUE lines)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def unit_state(unit):
    """The unit's {ActiveState, SubState, Result, NRestarts, MainPID} now ({} when systemctl
    cannot say)."""
    argv = ["systemctl", "show", "-p", ",".join(STATE_PROPERTIES), "--", unit]
    code, out = _run(argv)
    return parse_show(out) if code == 0 else {}


def missing_units(units):
    """Why a unit of `units` cannot be restarted: systemd says it has no such unit
    (LoadState=not-found), or None. When systemctl cannot answer (no systemd here), the
    restart itself reports that; this check only refuses what systemd says it does not know."""
    for unit in units:
        code, out = _run(["systemctl", "show", "-p", "LoadState", "--", unit])
        if code == 0 and parse_show(out).get("LoadState") == "not-found":
            return "systemd unit %s not found on the host (LoadState=not-found)" % unit
    return None


def n_restarts(state):
    """NRestarts as an int (0 when absent: systemd before v235 has no such property)."""
    try:
        return int(state.get("NRestarts") or 0)
    except ValueError:
        return 0


def split_cursor(text):
    """(lines, cursor) of journalctl output with --show-cursor: the entries and the cursor
    after the last of them (None when no entry was shown)."""
    lines, cursor = [], None
    for line in text.splitlines():
        if line.startswith(CURSOR_PREFIX):
            cursor = line[len(CURSOR_PREFIX) :].strip()
        else:
            lines.append(line)
    return lines, cursor


def journal_cursor(unit):
    """The cursor of the unit's last journal entry now (None when it has none yet)."""
    argv = ["journalctl", "-u", unit, "-n", "1", "-o", "cat", "--no-pager", "--show-cursor"]
    return split_cursor(_run(argv)[1])[1]


def start_marker(unit):
    """Where the watchdog starts reading: {"cursor": the journal's last entry before the
    restart}. Taken before `systemctl start`; `add_restarts` completes it after."""
    return {"cursor": journal_cursor(unit), "n_restarts": 0}


def add_restarts(marker, unit):
    """Record NRestarts right after the restart (systemd zeroes it on a manual start, a
    stand-in may not: either way only a growth from here is a restart loop)."""
    marker["n_restarts"] = n_restarts(unit_state(unit))
    return marker


class JournalReader:
    """The unit's journal lines after a cursor; each read moves the cursor on."""

    def __init__(self, unit, cursor):
        self.unit, self.cursor = unit, cursor

    def read(self):
        """The new lines as bytes (each ending in a newline), b"" when none."""
        argv = ["journalctl", "-u", self.unit, "-o", "cat", "--no-pager", "--show-cursor"]
        if self.cursor:
            argv.append("--after-cursor=" + self.cursor)
        lines, cursor = split_cursor(_run(argv)[1])
        if cursor is None:  # nothing new (journalctl printed no entry, or failed)
            return b""
        self.cursor = cursor
        return "".join(line + "\n" for line in lines).encode("utf-8", "replace")


def unit_failure(state, marker):
    """Why the unit is not starting, or None: it is dead (failed/inactive), or systemd
    restarted it since the push's restart (a restart loop)."""
    if not state:
        return None
    shown = "ActiveState=%s SubState=%s Result=%s NRestarts=%s" % tuple(
        state.get(key, "?") for key in ("ActiveState", "SubState", "Result", "NRestarts")
    )
    if state.get("ActiveState") in DEAD_STATES:
        return "the service died while starting (systemctl show: %s)" % shown
    before = int(marker.get("n_restarts") or 0)
    if n_restarts(state) > before:
        return (
            "the service is in a restart loop: systemd restarted it since the push's restart "
            "(NRestarts %d -> %d; systemctl show: %s)" % (before, n_restarts(state), shown)
        )
    return None


class UnitWatch:
    """The systemd side of the health op's watchdog: the journal after the restart's
    cursor (`journal.read`, a LogWatch source) and the unit's state (`failure`)."""

    def __init__(self, unit, marker):
        self.unit, self.marker, self.checked = unit, marker, None
        self.journal = JournalReader(unit, marker["cursor"])

    def failure(self):
        """Why the unit is not starting, or None; asks systemctl at most every UNIT_CHECK_S."""
        now = time.monotonic()
        if self.checked is not None and now - self.checked < UNIT_CHECK_S:
            return None
        self.checked = now
        return unit_failure(unit_state(self.unit), self.marker)


def unit_watch(marker, unit):
    """A UnitWatch from the restart's marker, or from now (marker None) when this request
    did not restart the unit."""
    marker = marker or add_restarts(start_marker(unit), unit)
    return UnitWatch(unit, marker)
