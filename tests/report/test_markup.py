"""Host, inventory and remote text reaches people verbatim: Rich markup in it is never applied."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ddtree_deploy.events import Event
from ddtree_deploy.report import (
    ConsoleSink,
    backups_table,
    facts_table,
    fleet_table,
    plan_table,
    smoke_table,
    status_table,
)
from ddtree_deploy.results import HostResult, Outcome

# Bold tag, unknown style (silently dropped by Rich) and a stray closing tag (MarkupError).
NASTY = "expected 'x = out[b]' near [anything.lower] then [/x"


def render(*renderables: object) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    for item in renderables:
        console.print(item)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return " ".join(out.split())  # folded cells and table borders aside


def test_console_sink_prints_message_host_verbatim():
    stream = io.StringIO()
    console = Console(file=stream, width=400, color_system=None)
    event = Event(ts="t", run_id="r", host="h[b]", stage="install", event="fail", message=NASTY)
    ConsoleSink(console)(event)
    assert NASTY in stream.getvalue()
    assert "h[b]" in stream.getvalue()


def failed(details: dict | None = None) -> HostResult:
    return HostResult("h[/x", Outcome.ROLLED_BACK, NASTY, details=details or {})


@pytest.mark.parametrize(
    "table",
    [fleet_table.__name__, "facts", "smoke", "plan", "status"],
)
def test_tables_print_messages_verbatim(table):
    make = {
        "fleet_table": lambda: fleet_table("push [b]", [failed()], stopped=NASTY),
        "facts": lambda: facts_table([failed()]),
        "smoke": lambda: smoke_table([failed()]),
        "plan": lambda: plan_table([failed()]),
        "status": lambda: status_table([failed()]),
    }[table]
    text = render(make())
    assert NASTY in text
    assert "h[/x" in text


def test_table_cells_from_host_data_are_verbatim():
    suites = [{"suite": "s[b]", "passed": False, "checks": [{"name": "c", "detail": NASTY}]}]
    status = {
        "journal": [{"state": "[b]", "deploy_id": "d[/x"}],
        "package_version": "0.5[b]",
        "deployed": "ddtree@[anything.lower]",
        "lock": {"holder": "me[/x"},
        "backups": [],
        "serving": NASTY,
        "services": [{"name": "g[b]", "kind": "command", "running": False, "health": "[/x]"}],
    }
    plan = {"files": {"a[b].py": "new", "serve": "flags"}, "serve": {"changes": [NASTY]}}
    backups = {"backups": [{"deploy_id": "[b]", "patchset": NASTY, "created": "[/x"}]}
    text = render(
        smoke_table([failed({"suites": suites})]),
        status_table([failed(status)]),
        plan_table([failed(plan)]),
        backups_table([failed(backups)]),
    )
    for verbatim in (NASTY, "s[b]", "0.5[b]", "ddtree@[anything.lower]", "me[/x", "a[b].py"):
        assert verbatim in text, verbatim
    assert "[b] d[/x" in text
    assert "g[b] stopped, [/x]" in text
