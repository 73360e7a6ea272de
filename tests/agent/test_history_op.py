"""The history op (agent/host/ops_history.py), run by the REAL bundle on a temp host: the
journal and its rotated files read as one history, each entry once, the last N deploys."""

from __future__ import annotations

import json

import pytest

from ddtree_deploy.agent.host.wire_results import HistoryResult
from ddtree_deploy.stages import op_builders as ops
from tests.support import write_journal


def entry(deploy: int, state: str, **more: object) -> dict:
    return {"deploy_id": f"d{deploy}", "state": state, "ts": f"2026-12-0{deploy}T00:00", **more}


def history(host, deploys: int = 20) -> HistoryResult:
    answer = host.call_ops(ops.history_op(deploys))
    assert answer.ok, answer
    found = answer.result_as("history", HistoryResult)
    assert found is not None
    return found


def test_a_host_without_a_journal_has_no_history(fake_host):
    found = history(fake_host)
    assert (found.entries, found.deploys, found.corrupt) == ([], 0, 0)


@pytest.fixture
def rotated_host(fake_host):
    """A journal rotated twice: .2 holds deploy 1, .1 deploys 2-3 (plus 1's carried copy),
    the journal deploy 4 plus carried copies of 2 and 3, and one corrupt line."""
    state = fake_host.state
    state.mkdir(mode=0o700)
    write_journal(
        state / "journal.jsonl.2",
        [entry(1, "installing", holder="ann@ctl pid 1"), entry(1, "committed")],
    )
    write_journal(
        state / "journal.jsonl.1",
        [
            {**entry(1, "committed"), "carried": True},
            entry(2, "installing", holder="bob@ctl pid 2"),
            entry(2, "rolled_back", reason="smoke failed"),
            entry(3, "installing"),
            entry(3, "committed"),
        ],
    )
    write_journal(
        state / "journal.jsonl",
        [
            {**entry(2, "rolled_back", reason="smoke failed"), "carried": True},
            {**entry(3, "committed"), "carried": True},
            entry(4, "installing", holder="ann@ctl pid 9"),
        ],
    )
    with (state / "journal.jsonl").open("a") as fh:
        fh.write("{not json\n")
    return fake_host


def test_rotated_files_and_the_journal_read_as_one_history_each_entry_once(rotated_host):
    found = history(rotated_host)
    assert [(e["deploy_id"], e["state"]) for e in found.entries] == [
        ("d1", "installing"), ("d1", "committed"),
        ("d2", "installing"), ("d2", "rolled_back"),
        ("d3", "installing"), ("d3", "committed"),
        ("d4", "installing"),
    ]  # fmt: skip
    assert found.deploys == 4 and found.corrupt == 1


def test_only_the_last_deploys_asked_for(rotated_host):
    found = history(rotated_host, deploys=2)
    assert sorted({e["deploy_id"] for e in found.entries}) == ["d3", "d4"]
    assert found.deploys == 4


def test_a_carried_copy_is_kept_when_its_rotated_file_is_gone(rotated_host):
    (rotated_host.state / "journal.jsonl.1").unlink()
    found = history(rotated_host)
    assert [(e["deploy_id"], e["state"]) for e in found.entries] == [
        ("d1", "installing"), ("d1", "committed"),
        ("d2", "rolled_back"), ("d3", "committed"), ("d4", "installing"),
    ]  # fmt: skip


def test_the_history_op_changes_nothing(rotated_host):
    before = {p.name: p.read_bytes() for p in rotated_host.state.iterdir()}
    history(rotated_host)
    after = {p.name: p.read_bytes() for p in rotated_host.state.iterdir()}
    assert after == before
    assert json.loads((rotated_host.state / "journal.jsonl").read_text().splitlines()[2])
