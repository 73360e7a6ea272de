"""The live view: one row per host on a terminal, plain lines otherwise, stdout untouched."""

from __future__ import annotations

import io

from rich.console import Console

from ddtree_deploy.events import HostRecorder
from ddtree_deploy.report import LiveDisplay, progress_sink
from ddtree_deploy.report.sinks import ConsoleSink


def terminal(width: int = 120) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=width, height=40), buffer


def test_live_rows_follow_events_and_stdout_stays_clean(capsys):
    console, _ = terminal()
    console.record = True
    with progress_sink(console, "push x@1", ["h0", "h1", "h2"]) as sink:
        assert isinstance(sink, LiveDisplay)
        h0 = HostRecorder("h0", "run", sink)
        h1 = HostRecorder("h1", "run", sink)
        h0.start("install")
        h1.start("preflight")
        h1.fail("preflight", "unreachable: refused")
        h1.info("summary", "unreachable", data={"outcome": "needs_attention"})
        console.print(sink)  # one frame, as Live draws it
        frame = console.export_text(clear=False)
    assert "push x@1  1/3 done, 1 failed" in frame
    lines = {
        line.split()[1]: line for line in frame.splitlines() if line.strip()[:1] in "·✓✗⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    }
    assert "install" in lines["h0"]  # running: spinner + stage
    assert "needs_attention" in lines["h1"] and "✗" in lines["h1"]
    assert "waiting" in lines["h2"]
    assert "h1 preflight fail  unreachable: refused" in frame  # printed above the grid
    assert capsys.readouterr().out == ""


def test_many_hosts_show_running_and_failed_first():
    console = Console(file=io.StringIO(), force_terminal=True, width=100, height=12)
    names = [f"h{i:02}" for i in range(30)]
    display = LiveDisplay(console, "push", names)
    HostRecorder("h25", "r", display).start("health")
    console.record = True
    console.print(display)
    text = console.export_text()
    assert "h25" in text and "more host(s) waiting or done" in text


def test_without_a_terminal_it_is_plain_lines():
    console = Console(file=io.StringIO(), force_terminal=False)
    with progress_sink(console, "push", ["h0"]) as sink:
        assert isinstance(sink, ConsoleSink)
