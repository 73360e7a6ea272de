"""The journal of the sandbox's systemd TEST STAND-IN: one file per unit, and `journalctl`.

Part of ``systemd_standin.py`` (see there), copied onto systemd sandbox hosts beside it.
``journal/NAME.log`` holds one entry per line (``epoch pid identifier<TAB>message``); an
entry's cursor is its line number in journalctl's cursor shape (``s=...;i=<hex>;...``).
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from pathlib import Path

if __package__:  # imported from the sandbox package
    from ddtree_sandbox.systemd_unitfile import ROOT, UnitError, unit_name
else:  # run by systemd_standin.py as a script (on a host): a top-level sibling
    from systemd_unitfile import ROOT, UnitError, unit_name


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
