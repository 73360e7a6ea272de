"""bench/report_peers.py: issue 46's tables (the floor and pyinfra per RTT, the controller-only
tables) and target verdicts from a results dict; bench/report.py puts them in the doc."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from floor import BARE_SSH, FLOOR  # noqa: E402
from pyinfra_peer import PYINFRA  # noqa: E402
from report import render  # noqa: E402
from report_peers import (  # noqa: E402
    NOT_IN_STANDIN,
    marginal_cpu_s,
    peer_rows,
    render_controller,
    render_floor,
)
from summary import ANSIBLE_COLD, ANSIBLE_WARM, DDTREE_A, summarise  # noqa: E402


def ratio(median: float, low: float, high: float) -> dict:
    return {"median": median, "min": low, "max": high}


def tool(wall_s: float) -> dict:
    return {**summarise([wall_s]), "cpu_s": summarise([0.5]), "load_1m": [1.0]}


def results(ours_over_floor: float = 1.4, pyinfra: float | None = 3.5) -> dict:
    pair = {
        "ours_over_floor": ratio(ours_over_floor, 1.2, 1.9),
        "ours_over_bare_ssh": ratio(4.0, 3.0, 5.0),
    }
    if pyinfra is None:
        pair["pyinfra_why"] = "pyinfra not installed"
    else:
        pair["pyinfra_over_ours"] = ratio(pyinfra, 2.5, 4.5)
    tools = {DDTREE_A: tool(1.0), ANSIBLE_COLD: tool(10), ANSIBLE_WARM: tool(9),
             FLOOR: tool(0.7), BARE_SSH: tool(0.25), PYINFRA: tool(3.5)}  # fmt: skip
    cold = {"cold": ratio(10, 9, 11), "warm": ratio(9, 8, 10)}
    return {"A": {"25": tools}, "A_ratios": {"25": cold}, "A_floor": {"25": pair}}


def standin_row(n: int, cpu_per_host: float, wall_ratio: float) -> dict:
    return {
        "wall": summarise([wall_ratio]),
        "cpu_per_host": summarise([cpu_per_host]),
        "rest_cpu_per_host": summarise([0.04]),  # the stand-in's sshd and replay per host
        "ratio_to_first": ratio(wall_ratio, wall_ratio, wall_ratio),
        "parallel": min(n, 64),
        "load_1m": [1.0],
    }


def b_ctl(ansible_cpu: float = 0.9, wall_256: float = 3.0) -> dict:
    return {
        "cpus": 2, "parallel": 64, "controller_cores": "0", "host_cores": "1",
        "recorded_answers": 5,
        "standin": {"1": standin_row(1, 0.6, 1.0), "256": standin_row(256, 0.012, wall_256)},
        "pinned": {"16": {
            DDTREE_A: {"wall": summarise([2.0]), "cpu_per_host": summarise([0.04])},
            ANSIBLE_COLD: {"wall": summarise([20.0]), "cpu_per_host": summarise([ansible_cpu])},
        }, "pyinfra_why": "pyinfra not installed"},
    }  # fmt: skip


FLOOR_T, PYINFRA_T, CPU_T, WALL_T = range(4)  # peer_rows' order


def verdicts(data: dict) -> list[str]:
    return [row.verdict for row in peer_rows(data)]


def test_floor_table_has_a_row_per_rtt_with_paired_ratios():
    text = "\n".join(render_floor(results()))
    assert "| 25 | 1.00 (1.00–1.00) | 0.70 (0.70–0.70) | 0.25 (0.25–0.25) | 3.50" in text
    assert "1.4× (1.2–1.9) | 4.0× (3.0–5.0) | 3.5× (2.5–4.5) |" in text


def test_floor_table_says_why_pyinfra_is_missing():
    assert "pyinfra not installed" in "\n".join(render_floor(results(pyinfra=None)))
    assert render_floor({}) == []


def test_floor_targets_met_missed_and_not_run():
    assert verdicts(results()) == ["met", "met", "not run", "not run"]
    missed = verdicts(results(ours_over_floor=1.6, pyinfra=2.9))
    assert missed[FLOOR_T] == "missed" and missed[PYINFRA_T] == "missed"
    assert verdicts(results(pyinfra=None))[PYINFRA_T] == "not run"


def test_controller_targets_from_pinned_cpu_and_standin_wall():
    got = verdicts({"B_ctl": b_ctl()})
    assert got[CPU_T] == "met" and got[WALL_T] == "met"  # 0.9/0.04 = 22.5
    got = verdicts({"B_ctl": b_ctl(ansible_cpu=0.5, wall_256=4.5)})
    assert got[CPU_T] == "missed" and got[WALL_T] == "missed"
    # the miss says which side's CPU bounds it: 256 x 0.012 s controller, 256 x 0.04 s hosts
    (why,) = [r.why for r in peer_rows({"B_ctl": b_ctl(wall_256=4.5)}) if r.verdict == "missed"]
    assert "controller's core needs 3.1 s" in why and "10.2 s on 1 host core(s)" in why
    assert "4.0 s allowed" in why


def test_controller_tables_label_the_standin_and_show_marginal_cpu():
    text = "\n".join(render_controller(b_ctl()))
    assert "timing only" in text and NOT_IN_STANDIN in text
    assert "| 256 | 64 |" in text
    assert "| 16 | Ansible playbook (cold SSH) | 20.00 (20.00–20.00) | 0.9000" in text
    assert "22.5×" in text  # Ansible's CPU per host over ours
    assert "pyinfra not installed" in text


def test_marginal_cpu_is_the_rise_per_added_host():
    standin = b_ctl()["standin"]  # 1 host 0.6 s; 256 hosts 0.012 s each = 3.072 s
    assert marginal_cpu_s(standin, "1") == "—"
    assert marginal_cpu_s(standin, "256") == f"{(3.072 - 0.6) / 255:.4f}"


def test_controller_table_says_why_on_one_core():
    text = "\n".join(render_controller({"cpus": 1, "why": "one CPU core: no split"}))
    assert "Not measured: one CPU core: no split." in text
    rows = peer_rows({"B_ctl": {"cpus": 1, "why": "one CPU core: no split"}})
    assert [r.why for r in rows[2:]] == ["one CPU core: no split"] * 2


def test_the_doc_carries_the_new_tables_and_targets():
    doc = render({**results(), "B_ctl": b_ctl()}, None)
    assert "## Scenario A against the floor and pyinfra" in doc
    assert "## Scenario B-ctl: the controller alone" in doc
    assert "| A: ≤ 1.5× the floor at 25 ms | 1.4× (1.2–1.9) | **met** |" in doc
    assert "The floor (`bench/floor.py`)" in doc  # the method section
