"""How much progress people get on stderr: -q only failed stages (and no live view), the
default every stage's end, -v also the starts, -vv also each event's details (plain lines,
no live view). The final table is the command's (tests/cli/test_verbosity.py)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ddtree_deploy.events import Event
from ddtree_deploy.report import LiveDisplay, progress_sink
from ddtree_deploy.report.sinks import DETAILS, NORMAL, QUIET, STARTS, ConsoleSink


def event(kind: str, stage: str = "install", data: dict | None = None) -> Event:
    return Event(ts="t", run_id="r", host="h1", stage=stage, event=kind, message=kind, data=data)


EVENTS = [
    event("start"),
    event("ok", data={"files": 2}),
    event("skip", "smoke"),
    event("info", "gate", {"check": "tokens"}),
    event("fail", "health", {"log": "refused"}),
]


def printed(verbosity: int) -> list[str]:
    stream = io.StringIO()
    sink = ConsoleSink(Console(file=stream, width=200, color_system=None), verbosity)
    for e in EVENTS:
        sink(e)
    return stream.getvalue().splitlines()


def test_quiet_prints_only_failures():
    assert [line.split()[1:3] for line in printed(QUIET)] == [["health", "fail"]]


def test_normal_prints_every_end_but_no_start_and_no_details():
    lines = printed(NORMAL)
    assert [line.split()[2] for line in lines] == ["ok", "skip", "info", "fail"]


def test_v_adds_the_starts():
    assert [line.split()[2] for line in printed(STARTS)] == ["start", "ok", "skip", "info", "fail"]


def test_vv_adds_each_events_details_under_it():
    lines = printed(DETAILS)
    assert lines[2].strip() == '{"files": 2}'
    assert lines[-1].strip() == '{"log": "refused"}'
    assert len(lines) == 5 + 3  # the start, and each event without data, stand alone


@pytest.mark.parametrize("verbosity", [QUIET, DETAILS])
def test_quiet_and_vv_use_plain_lines_even_on_a_terminal(verbosity):
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with progress_sink(console, "push", ["h1"], verbosity) as sink:
        assert isinstance(sink, ConsoleSink)
    with progress_sink(console, "push", ["h1"], STARTS) as sink:  # control: -v keeps it
        assert isinstance(sink, LiveDisplay)
