"""report/clean.py: what a host's text loses before people see it (escape sequences, control
characters), what it keeps (the words, newlines, tabs, Rich markup shown as text), and the
sinks that use it. The same through a real host: tests/faults/test_host_escapes.py."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from ddtree_deploy.cli.context import guard_console
from ddtree_deploy.events import Event
from ddtree_deploy.report import LiveDisplay, fleet_table, junit_xml, summary_markdown
from ddtree_deploy.report.clean import clean_text, plain
from ddtree_deploy.results import HostResult, Outcome

EVIL = (
    "\x1b]0;pwned title\x07 \x1b[2J\x1b[5;31mblinking\x1b[0m \r"
    "overwritten \x9b2Jc1-cleared [red]markup[/red] end"
)
HOSTILE = ("\x1b]0;", "\x1b[2J", "\x1b[5;31m", "\x9b", "\x07", "\r", "pwned")


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("\x1b[1;31mred\x1b[0m", "red"),  # SGR
        ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # OSC 8 ended by ST
        ("a\x1b]52;c;cGF3bmVk\x07b", "ab"),  # OSC 52 (clipboard) ended by BEL
        ("a\x9d0;title\x9cb", "ab"),  # C1 OSC ... C1 ST
        ("a\x9b31mb", "ab"),  # C1 CSI
        ("a\x1b(Bb\x1bcc", "abc"),  # charset and reset (ESC c)
        ("a\x1bPq#0;1\x1b\\b", "ab"),  # DCS (sixel) ended by ST
        ("tab\there\nline\r\nnext", "tab\there\nline\nnext"),  # tab, newline, CRLF kept
        ("a\rb\x08c\x00d\x7fe\x85f", "abcdef"),  # CR, BS, NUL, DEL, NEL
        ("unterminated \x1b]0;title\nnext", "unterminated \nnext"),  # an OSC ends at the line
        ("[red]not markup[/red] ünïcødé ✓", "[red]not markup[/red] ünïcødé ✓"),
    ],
)
def test_clean_text(said, shown):
    assert clean_text(said) == shown


def test_plain_escapes_markup_after_cleaning():
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(plain(EVIL))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[red]markup[/red] end" in out and not any(h in out for h in HOSTILE)


def test_the_live_view_shows_a_hosts_message_without_its_escapes():
    stream = io.StringIO()
    console = Console(file=stream, width=200, force_terminal=True, color_system="truecolor")
    with LiveDisplay(console, "push", ["h1"]) as live:
        live(Event(ts="t", run_id="r", host="h1", stage="smoke", event="start"))
        live(Event(ts="t", run_id="r", host="h1", stage="smoke", event="info", message=EVIL))
        live._live.refresh()
        live(Event(ts="t", run_id="r", host="h1", stage="smoke", event="fail", message=EVIL))
    out = stream.getvalue()
    assert "blinking" in out and "[red]markup[/red]" in out
    # Live's own redraw moves the cursor with CR: the host's CR is the one before its word
    hostile = [h for h in HOSTILE if h != "\r"] + ["\roverwritten"]
    assert not any(h in out for h in hostile), repr(out[-1500:])


def test_tables_summary_and_junit_drop_a_hosts_escapes():
    result = HostResult(host="h1", outcome=Outcome.NEEDS_ATTENTION, message=EVIL)
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(fleet_table("push", [result]))
    for out in (console.file.getvalue(), summary_markdown("push", [result]),  # type: ignore[attr-defined]
                junit_xml("push", [result])):  # fmt: skip
        assert not any(h in out for h in HOSTILE), repr(out)


def test_the_clean_console_is_the_last_guard_for_anything_printed():
    stream = io.StringIO()
    console = guard_console(Console(file=stream, width=200, force_terminal=True))
    console.print(Text.assemble(("error:", "bold red"), f" {EVIL}"))
    out = stream.getvalue()
    assert "error:" in out and "blinking" in out
    assert not any(h in out for h in HOSTILE), repr(out)
