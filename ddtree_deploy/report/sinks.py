"""Where events go: JSON Lines on stdout (data), plain lines on stderr (people)."""

from __future__ import annotations

import json
import sys
import threading
from typing import TextIO

from rich.console import Console

from ddtree_deploy.events import Event, EventSink
from ddtree_deploy.report.clean import plain

_STYLE = {"ok": "green", "fail": "bold red", "skip": "dim", "info": "cyan", "start": "dim"}


class JsonLinesSink:
    """One JSON object per line, flushed at once so a CI job or a test can follow along.

    `command` (e.g. `push`): written into every `summary` line's data as "command", so a
    later run reading the file back (`push --retry FILE`) knows which command wrote it.
    """

    def __init__(self, stream: TextIO | None = None, command: str | None = None):
        self._stream = stream or sys.stdout
        self._command = command
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self._command and event.stage == "summary":
            data = {**(event.data or {}), "command": self._command}
            event = event.model_copy(update={"data": data})
        with self._lock:
            self._stream.write(event.model_dump_json() + "\n")
            self._stream.flush()


# How much ConsoleSink prints (the CLI's -q, nothing, -v, -vv).
QUIET = -1  # only failed stages: the final table says the rest
NORMAL = 0  # every stage's end (ok, fail, skip) and info lines
STARTS = 1  # and every stage's start
DETAILS = 2  # and each event's data, as one JSON line under it


class ConsoleSink:
    """Human progress on stderr, as much as `verbosity` says (QUIET..DETAILS). Host, stage,
    message and details are printed verbatim (markup escaped), without a host's escapes
    (report/clean.py)."""

    def __init__(self, console: Console, verbosity: int = NORMAL):
        self._console = console
        self._verbosity = verbosity
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if event.event == "start" and self._verbosity < STARTS:
            return
        if event.event != "fail" and self._verbosity <= QUIET:
            return
        if event.stage == "summary":
            return  # the summary table says it better
        took = f" ({event.duration_s:.2f}s)" if event.duration_s else ""
        style = _STYLE[event.event]
        with self._lock:
            self._console.print(
                f"[bold]{plain(event.host)}[/] {plain(f'{event.stage:<10}')} "
                f"[{style}]{event.event}[/]{took}"
                + (f"  {plain(event.message)}" if event.message else ""),
                markup=True,
                highlight=False,
                soft_wrap=True,
            )
            if event.data and self._verbosity >= DETAILS:
                details = json.dumps(event.data, sort_keys=True, default=str)
                self._console.print(
                    f"  [dim]{plain(details)}[/]", markup=True, highlight=False, soft_wrap=True
                )


class FanoutSink:
    """Every event to each of `sinks` in turn (None entries are left out)."""

    def __init__(self, *sinks: EventSink | None):
        self._sinks = [s for s in sinks if s is not None]

    def __call__(self, event: Event) -> None:
        for sink in self._sinks:
            sink(event)
