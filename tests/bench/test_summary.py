"""bench/summary.py: medians with min–max, paired ratios, the targets table's verdicts;
bench/report.py's machine speed line."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from summary import (  # noqa: E402 - bench/ is a folder of scripts, not a package
    ANSIBLE_COLD,
    DDTREE_A,
    paired_ratios,
    summarise,
    target_rows,
)


def test_summarise_gives_median_and_range():
    got = summarise([3.0, 1.0, 2.0, 10.0])
    assert (got["median_s"], got["min_s"], got["max_s"], got["runs"]) == (2.5, 1.0, 10.0, 4)


def test_paired_ratio_is_taken_per_run():
    # run 2 was slow for both: per-run ratios stay 10, a ratio of medians would not
    assert paired_ratios([10.0, 40.0, 12.0], [1.0, 4.0, 1.2]) == {
        "median": 10.0,
        "min": 10.0,
        "max": 10.0,
    }


def _scaling_row(ratio: float) -> dict:
    cpu = summarise([0.05])
    return {
        **summarise([ratio]),  # wall s: one host takes 1.0 s
        "ratio": {"median": ratio, "min": ratio, "max": ratio},
        "cpu_per_host": cpu,
        "proxies_cpu_per_host": cpu,
        "hosts_cpu_per_host": cpu,
        "load_1m": {"median": 3.0, "all": [3.0]},
    }


def _results(cold: float, warm: float, b16: float) -> dict:
    tool = summarise([1.0])
    return {
        "A": {"25": {DDTREE_A: tool, ANSIBLE_COLD: tool}},
        "A_ratios": {
            "25": {
                "cold": {"median": cold, "min": cold, "max": cold},
                "warm": {"median": warm, "min": warm, "max": warm},
            }
        },  # fmt: skip
        "B": {"1": _scaling_row(1.0), "16": _scaling_row(b16)},
        "I": {
            "floor": summarise([10.0]),
            "suite": summarise([12.0]),
            "ratio": {"median": 1.2, "min": 1.1, "max": 1.3},
        },  # fmt: skip
    }


def test_targets_met_missed_and_not_run():
    rows = {row.target: row for row in target_rows(_results(cold=11.0, warm=9.5, b16=2.4))}
    ansible = rows["A: ≥ 10× Ansible cold and warm at 25 ms RTT"]
    assert (ansible.verdict, ansible.why.startswith("ours 1.00 s")) == ("missed", True)
    assert rows["A: Ansible (cold) ratio at 25 ms RTT ≥ 10×"].verdict == "met"
    assert rows["A: Ansible (cold) ratio at 25 ms RTT ≥ 10×"].why == ""
    assert rows["I: import gate ≤ 1.25× its floor"].verdict == "met"
    scaling = rows["B: 16 hosts ≤ 2× one host"]
    assert scaling.verdict == "missed" and "controller 0.050 s" in scaling.why
    # 16 hosts x 0.15 CPU s on 2 cores: >= 1.2 s of wall, against 2 x one host's 1.0 s
    assert "2.4 CPU s on 2 shared cores" in scaling.why
    assert "at least 1.2 s of wall, against the target's 2.0 s" in scaling.why
    assert rows["B: 64 hosts ≤ 4× one host"].verdict == "not run"
    assert rows["builder ≤ 0.8× the reference at every budget"].verdict == "not run"


def test_builder_row_judges_the_worst_budget():
    results = {"builder_vs_reference": {"rows": [
        {"budget": 16, "threads": 1, "ratio": 0.7},
        {"budget": 1024, "threads": 2, "ratio": 0.9},
    ]}}  # fmt: skip
    row = next(r for r in target_rows(results) if r.target.startswith("builder"))
    assert row.verdict == "missed" and "budget 1024" in row.why
    results["builder_vs_reference"]["rows"][1]["ratio"] = 0.8
    row = next(r for r in target_rows(results) if r.target.startswith("builder"))
    assert (row.verdict, row.why) == ("met", "")


def test_the_machine_speed_line_shows_only_when_recorded():
    from report import machine_speed_line

    assert machine_speed_line({}) == []  # results from before the calibration
    line = machine_speed_line({"python_loop_ms": 105.9, "python_start_ms": 84.9})[0]
    assert "105.9 ms" in line and "`python -c pass` 84.9 ms" in line
