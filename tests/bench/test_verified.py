"""Scenario V's pure parts: the per-stage breakdown derived from a recorded `--json` event
list (bench/verified_breakdown.py) and its table (bench/report_verified.py). No timing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from report_verified import (  # noqa: E402
    render_cut_rows,
    render_suite_rows,
    render_verified,
    render_verified_rows,
)
from verified_breakdown import (  # noqa: E402 - bench/ is a folder of scripts, not a package
    DOWN,
    NEW_SERVES,
    OLD_PHASE,
    OLD_SERVES,
    TOTAL,
    UNACCOUNTED,
    old_phase_s,
    paired_cut,
    phase_totals,
    run_breakdown,
    serving_during,
    stage_seconds,
    suite_seconds,
    summarise_breakdowns,
    summarise_suites,
)

# One host's push with every gate, as `push --gate full --json` reports it (seconds).
PUSH = [
    ("preflight", 0.2), ("backup", 0.1), ("journal", 0.0), ("baseline", 20.0),
    ("install", 0.3), ("compile", 0.4), ("smoke", 30.0), ("reference", 10.0),
    ("restart", 1.0), ("health", 25.0), ("verify", 40.0), ("canary", 60.0),
    ("commit", 0.1), ("unlock", 0.0), ("prune", 0.1),
]  # fmt: skip


def recorded(host: str = "host0", push=PUSH, fail: str | None = None) -> list[dict]:
    """The event lines of one push: a start and an ok (or fail) per stage, plus info lines
    and the summary, which carry no stage time."""
    events: list[dict] = [{"host": "", "stage": "gate", "event": "ok", "duration_s": 0.5}]
    for stage, seconds in push:
        events.append({"host": host, "stage": stage, "event": "start", "duration_s": None})
        events.append({"host": host, "stage": stage, "event": "info", "duration_s": None})
        end = "fail" if stage == fail else "ok"
        events.append({"host": host, "stage": stage, "event": end, "duration_s": seconds})
    events.append({"host": host, "stage": "summary", "event": "info", "duration_s": 9.0})
    return events


def test_stage_seconds_in_push_order_from_the_end_lines_of_one_host():
    events = recorded() + recorded("host1", [("smoke", 99.0)])
    got = stage_seconds(events, "host0")
    assert list(got) == [s for s, _ in PUSH]
    assert got == dict(PUSH)  # host1's smoke, the summary's and gate's seconds left out


def test_a_stage_reported_twice_is_summed():
    events = recorded(push=[("unlock", 0.25), ("unlock", 0.5)])
    assert stage_seconds(events, "host0") == {"unlock": 0.75}


def test_a_failed_stage_is_refused_not_timed():
    with pytest.raises(ValueError, match="stage verify failed"):
        stage_seconds(recorded(fail="verify"), "host0")


def test_run_breakdown_shows_what_no_stage_accounts_for():
    stages_s = sum(s for _, s in PUSH)
    got = run_breakdown(recorded(), "host0", wall_s=stages_s + 3.0)
    assert got[UNACCOUNTED] == pytest.approx(3.0)
    assert got[TOTAL] == stages_s + 3.0
    # a wall below the stages' sum (clock skew) never gives negative time
    assert run_breakdown(recorded(), "host0", wall_s=1.0)[UNACCOUNTED] == 0.0


def test_run_breakdown_refuses_a_host_with_no_stage():
    with pytest.raises(ValueError, match="no stage"):
        run_breakdown(recorded(), "host9", wall_s=1.0)


@pytest.mark.parametrize(
    ("stage", "serving"),
    [
        ("preflight", OLD_SERVES), ("baseline", OLD_SERVES), ("smoke", OLD_SERVES),
        ("reference", OLD_SERVES), ("drain", DOWN), ("restart", DOWN), ("health", DOWN),
        ("verify", NEW_SERVES), ("canary", NEW_SERVES), ("commit", NEW_SERVES),
    ],
)  # fmt: skip
def test_what_serves_while_each_stage_runs(stage, serving):
    assert serving_during(stage) == serving


def test_summarise_gives_median_spread_share_and_serving_per_stage():
    runs = [
        {"smoke": 10.0, "restart": 1.0, TOTAL: 20.0},
        {"smoke": 30.0, "restart": 3.0, TOTAL: 40.0},
        {"smoke": 20.0, TOTAL: 30.0},  # no restart reported: counts 0
    ]
    rows = {r["stage"]: r for r in summarise_breakdowns(runs)}
    assert list(rows) == ["smoke", "restart", TOTAL]
    assert rows["smoke"] | {} == {
        "stage": "smoke", "median_s": 20.0, "min_s": 10.0, "max_s": 30.0, "runs": 3,
        "serving": OLD_SERVES, "share": pytest.approx(20 / 30, abs=1e-3),
    }  # fmt: skip
    assert (rows["restart"]["median_s"], rows["restart"]["min_s"]) == (1.0, 0.0)
    assert rows[TOTAL]["serving"] == "—" and rows[TOTAL]["share"] == 1.0
    assert summarise_breakdowns([]) == []


def test_phase_totals_split_the_stages_by_what_serves():
    runs = [run_breakdown(recorded(), "host0", wall_s=200.0)]
    phases = phase_totals(summarise_breakdowns(runs))
    assert phases == {
        OLD_SERVES: pytest.approx(0.2 + 0.1 + 20 + 0.3 + 0.4 + 30 + 10),
        DOWN: pytest.approx(26.0),
        NEW_SERVES: pytest.approx(40 + 60 + 0.2),
    }


def test_table_has_one_row_per_stage_with_its_columns():
    rows = summarise_breakdowns([run_breakdown(recorded(), "host0", wall_s=200.0)])
    table = render_verified_rows(rows)
    assert table[0].startswith("| stage | median s | spread")
    assert len(table) == 2 + len(PUSH) + 2  # header, rule, stages, unaccounted, total
    assert "| smoke | 30.00 | 30.00–30.00 | yes | 15% |" in table
    assert "| health | 25.00 | 25.00–25.00 | no (down) | 12% |" in table


def test_section_says_not_measured_without_results_and_shows_them_with():
    assert any("Not measured" in line for line in render_verified(None))
    failed = render_verified({"why": "a push failed (V push 1 exited 1:)"})
    assert "Not measured: a push failed (V push 1 exited 1:)." in failed
    rows = summarise_breakdowns([run_breakdown(recorded(), "host0", wall_s=200.0)])
    v = {"rows": rows, "phases": phase_totals(rows), "setup": {"hosts": 1, "runs": 1}}
    text = "\n".join(render_verified(v))
    assert "| canary | 60.00 |" in text and "old server 61.00 s" in text
    assert "Not measured" not in text


def suite_line(stage: str, suite: str, seconds: float | None, host: str = "host0") -> dict:
    data = {"suite": suite, "passed": True, "duration_s": seconds}
    return {"host": host, "stage": stage, "event": "info", "duration_s": None, "data": data}


def test_suite_seconds_from_the_suites_info_lines_of_one_host():
    events = [
        *recorded(),
        suite_line("smoke", "imports", 8.0),
        suite_line("smoke", "gpu", None),  # skipped: no GPU, reports no time
        suite_line("verify", "server", 6.5),
        suite_line("smoke", "imports", 99.0, host="host1"),
    ]
    assert suite_seconds(events, "host0") == {
        "smoke: imports": 8.0, "smoke: gpu": 0.0, "verify: server": 6.5,
    }  # fmt: skip


def test_suite_rows_median_over_runs_with_what_serves():
    runs = [{"smoke: imports": 8.0, "verify: server": 6.0}, {"smoke: imports": 10.0}]
    rows = summarise_suites(runs)
    assert [r["stage"] for r in rows] == ["smoke: imports", "verify: server"]
    assert (rows[0]["median_s"], rows[0]["serving"]) == (9.0, OLD_SERVES)
    assert (rows[1]["min_s"], rows[1]["serving"]) == (0.0, NEW_SERVES)
    table = render_suite_rows(rows)
    assert "| smoke: imports | 9.00 | 8.00–10.00 | yes |" in table
    v = {"rows": summarise_breakdowns([{TOTAL: 1.0}]), "suites": rows, "setup": {}}
    assert "| verify: server | 3.00 | 0.00–6.00 | no (new server) |" in render_verified(v)


def test_a_stage_that_ran_beside_another_is_shown_but_not_taken_from_the_wall():
    stages_s = sum(s for _, s in PUSH)
    got = run_breakdown(recorded(), "host0", wall_s=stages_s, overlapped=("reference",))
    assert got["reference"] == 10.0 and got[UNACCOUNTED] == pytest.approx(10.0)
    rows = summarise_breakdowns([got])
    assert phase_totals(rows, ("reference",))[OLD_SERVES] == pytest.approx(51.0)
    assert phase_totals(rows)[OLD_SERVES] == pytest.approx(61.0)


def test_paired_cut_gives_both_medians_and_the_median_of_the_savings():
    before = [
        {"smoke": 30.0, "reference": 2.0, "restart": 1.0, TOTAL: 70.0},
        {"smoke": 40.0, "reference": 3.0, "restart": 1.0, TOTAL: 90.0},
        {"smoke": 34.0, "reference": 2.0, "restart": 1.0, TOTAL: 72.0},
    ]
    after = [
        {"smoke": 20.0, "reference": 1.5, "restart": 1.0, TOTAL: 60.0},
        {"smoke": 22.0, "reference": 2.0, "restart": 1.0, TOTAL: 61.0},
        {"smoke": 30.0, "reference": 2.0, "restart": 1.0, TOTAL: 71.0},
    ]
    pairs = list(zip(before, after, strict=True))
    rows = {r["stage"]: r for r in paired_cut(pairs, ("reference",))}
    assert list(rows) == [
        "smoke", "reference (beside smoke after)", "restart", OLD_PHASE, TOTAL,
    ]  # fmt: skip
    assert rows[TOTAL] == {
        "stage": TOTAL, "before_s": 72.0, "after_s": 61.0, "saved_s": 10.0,
        "saved_min_s": 1.0, "saved_max_s": 29.0, "runs": 3,
    }  # fmt: skip
    # before the restart: smoke + reference before, smoke alone after (the reference inside)
    assert [old_phase_s(b) for b in before] == [32.0, 43.0, 36.0]
    assert old_phase_s(after[0], ("reference",)) == 20.0
    assert rows[OLD_PHASE]["saved_s"] == 12.0  # pairs: 12, 21, 6
    assert rows["restart"]["saved_s"] == 0.0
    table = render_cut_rows(list(rows.values()))
    assert f"| {TOTAL} | 72.00 | 61.00 | 10.00 | 1.00–29.00 |" in table
    v = {"rows": summarise_breakdowns(after), "setup": {}, "cut": list(rows.values())}
    assert "3 interleaved pair(s)" in "\n".join(render_verified(v))
