"""`history` for one host against a scripted agent (one read-only round trip), the pure
summary of journal entries, the fleet table (host text cleaned) and the holder a push now
writes into the journal, which the history shows as "by"."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ddtree_deploy.agent import OpResult
from ddtree_deploy.agent.host.wire import JournalState
from ddtree_deploy.pipeline.history import history_host, summarize_deploys
from ddtree_deploy.report.history import _STATE_STYLE, history_table, who
from ddtree_deploy.results import HostResult, Outcome
from tests.pipeline.fakehost import UNREACHABLE, scene
from tests.pipeline.test_push_logic import OPTS, push

ENTRIES: list[dict[str, Any]] = [
    {"deploy_id": "d1", "state": "installing", "ts": "2026-12-01T10:00", "run_id": "r1",
     "patchset": "ddtree@1.0.0", "holder": "ann@ctl pid 7"},
    {"deploy_id": "d1", "state": "committed", "ts": "2026-12-01T10:02", "run_id": "r1",
     "patchset": "ddtree@1.0.0", "holder": "ann@ctl pid 7"},
    {"deploy_id": "d2", "state": "installing", "ts": "2026-12-02T09:00", "run_id": "r2",
     "patchset": "ddtree@1.1.0", "holder": "bob@ctl pid 8"},
    {"deploy_id": "d1", "state": "rolled_back", "ts": "2026-12-03T08:00", "run_id": "r3",
     "reason": "rollback requested", "holder": "cy@ops pid 9"},
    {"deploy_id": "d0", "state": "committed", "ts": "2025-01-01T00:00"},  # before holders
]  # fmt: skip


def answer(entries: list[dict[str, Any]], deploys: int | None = None) -> OpResult:
    data = {"entries": entries, "deploys": deploys or len({e["deploy_id"] for e in entries})}
    return OpResult(op="history", ok=True, data=data, duration_s=0.01)


def test_summarize_deploys_tells_who_what_when_and_how_it_ended():
    records = {r.deploy_id: r for r in summarize_deploys(ENTRIES)}
    assert list(records) == ["d1", "d2", "d0"]
    d1 = records["d1"]
    assert (d1.patchset, d1.outcome, d1.started, d1.ended) == (
        "ddtree@1.0.0", "rolled_back", "2026-12-01T10:00", "2026-12-03T08:00"
    )  # fmt: skip
    assert (d1.holder, d1.ended_by, d1.run_id) == ("ann@ctl pid 7", "cy@ops pid 9", "r1")
    assert d1.reason == "rollback requested"
    assert records["d2"].outcome == "installing" and records["d2"].ended_by == ""
    assert records["d0"].holder == "" and who(records["d0"].to_dict()) == "?"
    assert who(d1.to_dict()) == "ann@ctl (ended by cy@ops)"


def test_history_host_is_one_round_trip_and_one_event_per_deploy():
    s = scene(history=answer(ENTRIES, deploys=7))
    result = history_host(s.run, 20)
    assert result.outcome == Outcome.OK and result.message == "3 of 7 deploys"
    assert s.fake.sent == [["history"]] and s.transport.stats.execs == 1
    sent = s.transport.requests[0].ops[0]
    assert sent.args == {"deploys": 20}
    deploys = [e.data["deploy"] for e in s.events if e.stage == "history" and e.event == "info"]
    assert [d["deploy_id"] for d in deploys] == ["d1", "d2", "d0"]
    assert result.details["history"] == deploys
    assert "history ok" in s.stages()


def test_a_journal_that_cannot_be_read_fails_the_host():
    failed = OpResult(op="history", ok=False, code="exception", error="PermissionError: x")
    result = history_host(scene(history=failed).run, 20)
    assert result.outcome == Outcome.FAILED and "PermissionError" in result.message


def test_an_unreadable_answer_needs_attention():
    bad = OpResult(op="history", ok=True, data={"entries": []}, duration_s=0.01)
    result = history_host(scene(history=bad).run, 20)
    assert result.outcome == Outcome.NEEDS_ATTENTION and "deploys" in result.message


def test_an_unreachable_host_is_said_not_raised():
    result = history_host(scene(connect=UNREACHABLE).run, 20)
    assert result.outcome != Outcome.OK and "refused" in result.message


def render(results: list[HostResult]) -> str:
    console = Console(record=True, width=400, color_system=None)
    console.print(history_table(results))
    return console.export_text()


def test_the_table_merges_hosts_by_start_and_names_unread_hosts():
    a = history_host(scene(history=answer(ENTRIES[:2])).run, 20)
    b = history_host(scene(history=answer(ENTRIES[2:3])).run, 20)
    b = HostResult("h2", b.outcome, b.message, details=b.details)
    gone = HostResult("h3", Outcome.NEEDS_ATTENTION, "cannot connect")
    text = render([b, a, gone])
    assert text.index("d1") < text.index("d2")  # oldest start first, whatever the host order
    assert "ann@ctl" in text and "pid 7" not in text
    assert "not read: h3: needs_attention: cannot connect" in text


def test_a_deploys_outcome_is_styled_by_its_journal_state():
    """The table's styles are keyed by the one JournalState definition (wire.py), every
    state a deploy can end in (never `corrupt`: a line, not a deploy)."""
    assert set(_STATE_STYLE) == set(JournalState) - {JournalState.CORRUPT}
    assert all(type(state) is JournalState for state in _STATE_STYLE)
    table = history_table([history_host(scene(history=answer(ENTRIES[:2])).run, 20)])
    assert list(table.columns[3].cells) == ["[green]committed[/]"]


def test_host_text_is_cleaned_before_the_console():
    """Negative control inside: the journal's text really holds an OSC and markup."""
    evil = "mallory\x1b]0;pwned\x07\x1b[2J[red]x[/red]\x9b31m@box"
    entries = [{**ENTRIES[0], "holder": evil, "patchset": "p\rq", "reason": "r\x07"}]
    result = history_host(scene(history=answer(entries)).run, 20)
    assert result.details["history"][0]["holder"] == evil  # the data keeps what the host said
    text = render([result])
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\r" not in text
    assert "mallory[red]x[/red]@box" in text  # markup shown as text, escapes dropped whole
    assert "pwned" not in text


def test_a_push_journals_who_ran_it():
    s = scene(smoke="smoke_failed")
    push(s)
    entries = [op.args["entry"] for r in s.transport.requests for op in r.ops if op.op == "journal"]
    assert [e["state"] for e in entries] == ["installing", "rolled_back"]
    assert {e["holder"] for e in entries} == {OPTS.holder}
    s = scene()
    push(s)
    committed = [
        op.args["entry"] for r in s.transport.requests for op in r.ops if op.op == "journal"
    ][-1]
    assert committed["state"] == "committed" and committed["holder"] == OPTS.holder
