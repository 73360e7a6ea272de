"""The host journal's bound (state.rotate_journal), run by the REAL bundle on a temp host: a
journal past JOURNAL_ROTATE_BYTES is rotated at the next append, what facts, recover,
rollback and prune read from it survives, the old bytes are kept as journal.jsonl.1..3."""

from __future__ import annotations

import json
from pathlib import Path

from ddtree_deploy.agent.host.state import (
    JOURNAL_CARRY_DEPLOYS,
    JOURNAL_KEEP_ROTATED,
    JOURNAL_ROTATE_BYTES,
    deploy_states,
)
from ddtree_deploy.stages import op_builders as ops
from tests.support import JOURNAL_FILES, journal_history, write_journal


def read_entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_mark(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "carried"}


def test_a_big_journal_is_rotated_and_every_deploy_state_read_survives(fake_host):
    journal = fake_host.state / "journal.jsonl"
    fake_host.state.mkdir(mode=0o700)
    old = journal_history(1300)
    data = write_journal(journal, old)
    assert len(data) > JOURNAL_ROTATE_BYTES  # the precondition: past the bound
    before = fake_host.call(("facts", {})).facts()
    assert [d["deploy_id"] for d in before.pending] == ["202600000000-old", "202600000009-old"]

    answer = fake_host.call_ops(ops.journal_op("20270000-new", "installing", files=JOURNAL_FILES))
    assert answer.ok, answer
    carried = JOURNAL_CARRY_DEPLOYS + 2  # the last 50 deploys and the two pending ones
    assert answer.results[0].data["rotated"] == carried

    # the old bytes are kept whole, beside a journal as small as what it carries
    rotated = Path(f"{journal}.1")
    assert rotated.read_bytes() == data
    assert oct(journal.stat().st_mode & 0o777) == oct(rotated.stat().st_mode & 0o777) == "0o600"
    now = read_entries(journal)
    assert len(now) == carried + 1 and journal.stat().st_size < JOURNAL_ROTATE_BYTES // 100
    assert all(e["carried"] for e in now[:-1]) and "carried" not in now[-1]

    # every deploy state an op reads: the same latest entry, in the same order
    old_states = deploy_states(old)
    new_states = deploy_states(now[:-1])
    assert {k: without_mark(v) for k, v in new_states.items()} == {
        k: old_states[k] for k in new_states
    }
    after = fake_host.call(("facts", {})).facts()
    assert [without_mark(d) for d in after.pending[:-1]] == before.pending
    assert after.pending[-1]["deploy_id"] == "20270000-new"
    assert [without_mark(d) for d in after.deploys[:-1]] == before.deploys[1:]


def test_below_the_bound_nothing_rotates_and_past_it_three_old_journals_are_kept(fake_host):
    journal = fake_host.state / "journal.jsonl"
    fake_host.state.mkdir(mode=0o700)
    small = write_journal(journal, journal_history(10))
    answer = fake_host.call_ops(ops.journal_op("d-small", "committed"))
    assert answer.results[0].data["rotated"] is None  # the control: no rotation below it
    assert journal.read_bytes().startswith(small) and not Path(f"{journal}.1").exists()

    kept = []
    for round_ in range(JOURNAL_KEEP_ROTATED + 1):
        kept.insert(0, write_journal(journal, journal_history(1300, prefix=f"r{round_}")))
        assert fake_host.call_ops(ops.journal_op(f"d{round_}", "committed")).ok
    names = sorted(p.name for p in fake_host.state.iterdir() if p.name.startswith("journal"))
    assert names == ["journal.jsonl"] + [
        f"journal.jsonl.{n}" for n in range(1, JOURNAL_KEEP_ROTATED + 1)
    ]
    for n, data in enumerate(kept[:JOURNAL_KEEP_ROTATED], start=1):
        assert Path(f"{journal}.{n}").read_bytes() == data, n  # newest first; the oldest gone


def test_a_rotation_that_fails_is_reported_and_the_entry_still_lands(fake_host):
    journal = fake_host.state / "journal.jsonl"
    fake_host.state.mkdir(mode=0o700)
    data = write_journal(journal, journal_history(1300))
    Path(f"{journal}.2").write_text("an old journal")  # shifting it onto a dir fails
    Path(f"{journal}.3").mkdir()
    answer = fake_host.call_ops(ops.journal_op("d-late", "committed"))
    assert answer.ok, answer  # a commit is never failed by housekeeping
    result = answer.results[0].data
    assert result["rotated"] is None and "journal.jsonl.2" in result["rotate_error"]
    assert journal.read_bytes().startswith(data)
    assert read_entries(journal)[-1]["deploy_id"] == "d-late"
