"""Progress for people on stderr: a Rich Live grid on a terminal, plain lines elsewhere.

One row per host: a spinner while a stage runs, the current stage, elapsed time, and the last
message. Worker threads only call the sink; Live redraws from the rows on its own thread.
stdout is never redirected (`redirect_stdout=False`), so JSON Lines stay on stdout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ddtree_deploy.events import Event, EventSink
from ddtree_deploy.report.clean import clean_text, plain
from ddtree_deploy.report.sinks import DETAILS, NORMAL, QUIET, ConsoleSink

_MARK = {
    "ok": "[green]✓[/]",
    "skip": "[dim]-[/]",
    "fail": "[bold red]✗[/]",
    "waiting": "[dim]·[/]",
}
_OUTCOME_MARK = {"ok": "ok", "no_changes": "ok", "not_started": "skip"}


@dataclass
class _Row:
    host: str
    stage: str = "waiting"
    state: str = "waiting"  # waiting | running | ok | skip | fail (last event seen)
    started: float | None = None
    ended: float | None = None
    message: str = ""
    outcome: str | None = None
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))

    def elapsed_s(self, now: float) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or now) - self.started


class LiveDisplay:
    """An EventSink that keeps one row per host and renders them with Rich Live."""

    def __init__(self, console: Console, title: str, hosts: Sequence[str]):
        self._console = console
        self._title = title
        self._rows = {name: _Row(name) for name in hosts}
        self._lock = threading.Lock()
        self._live = Live(
            self,
            console=console,
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=8,
            transient=False,
        )

    def __enter__(self) -> LiveDisplay:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def __call__(self, event: Event) -> None:
        now = time.monotonic()
        with self._lock:
            row = self._rows.setdefault(event.host, _Row(event.host))
            if row.started is None and event.event != "skip":
                row.started = now
            if event.stage == "summary":
                data = event.data or {}
                row.outcome = str(data.get("outcome") or "")
                row.state = _OUTCOME_MARK.get(row.outcome, "fail")
                row.ended = now
                row.message = clean_text(event.message)
                return
            if event.event == "info" and row.state == "running":
                row.message = clean_text(event.message)  # news from a running stage
                return
            row.stage = event.stage
            row.state = "running" if event.event == "start" else event.event
            # the clock runs only while a stage does: a host waiting for the end of the
            # run (its summary comes after any undo) keeps the time its work took
            row.ended = None if event.event == "start" else now
            if event.event != "start":
                row.message = clean_text(event.message)
        if event.event == "fail":
            self._live.console.print(
                f"[bold]{plain(event.host)}[/] {event.stage} [bold red]fail[/]  "
                + plain(event.message),
                highlight=False,
                soft_wrap=True,
            )

    def __rich__(self) -> RenderableType:
        now = time.monotonic()
        with self._lock:
            rows = list(self._rows.values())
        done = sum(r.state not in ("waiting", "running") for r in rows)
        failed = sum(r.state == "fail" for r in rows)
        shown = _visible(rows, max(self._console.height - 6, 5))
        table = Table(box=None, show_header=False, padding=(0, 1))
        for _ in range(5):
            table.add_column(no_wrap=True)
        for r in shown:
            mark: RenderableType = r.spinner if r.state == "running" else _MARK.get(r.state, "")
            label = r.outcome or r.stage
            table.add_row(
                mark,
                Text(clean_text(r.host), style="bold"),
                Text(label, style="dim" if r.state == "waiting" else ""),
                f"{r.elapsed_s(now):6.1f}s" if r.started else "",
                Text(r.message[:80], style="dim"),
            )
        head = f"[bold]{escape(self._title)}[/]  {done}/{len(rows)} done"
        head += f", [red]{failed} failed[/]" if failed else ""
        hidden = len(rows) - len(shown)
        parts: list[RenderableType] = [head, table]
        if hidden:
            parts.append(f"[dim]… {hidden} more host(s) waiting or done[/]")
        return Group(*parts)


def _visible(rows: list[_Row], limit: int) -> list[_Row]:
    """All rows when they fit; else running and failed rows first, then the rest in order."""
    if len(rows) <= limit:
        return rows
    urgent = [r for r in rows if r.state in ("running", "fail")]
    rest = [r for r in rows if r not in urgent and r.state != "waiting"]
    return (urgent + rest)[:limit]


@contextmanager
def progress_sink(
    console: Console, title: str, hosts: Sequence[str], verbosity: int = NORMAL
) -> Iterator[EventSink]:
    """The Live view while the block runs when `console` is a terminal; plain lines otherwise,
    and also under -q (only failures: no live view) and -vv (every event with its details).
    `verbosity`: report/sinks.py's QUIET..DETAILS."""
    plain_lines = verbosity in (QUIET, DETAILS)
    if plain_lines or not console.is_terminal or console.is_dumb_terminal:
        yield ConsoleSink(console, verbosity=verbosity)
        return
    with LiveDisplay(console, title, hosts) as display:
        yield display
