"""The gate's four verdicts (Argo's Successful/Failed/Inconclusive/Error, Kayenta's
Pass/High/Low/Nodata) and what each does: pure rules, no measurement."""

from __future__ import annotations

import pytest

from ddtree_deploy.gate.verdict import (
    ACTION_RANK,
    Action,
    Verdict,
    action_of,
    judge_drop,
    judge_ratio,
)


@pytest.mark.parametrize(
    "drop, threshold, band, verdict",
    [
        (-0.30, 0.05, 0.0, Verdict.PASS),  # faster
        (0.05, 0.05, 0.0, Verdict.PASS),  # exactly at the threshold
        (0.0501, 0.05, 0.0, Verdict.FAIL),  # no band: past the threshold is a fail
        (0.04, 0.05, 0.20, Verdict.PASS),  # within the threshold, whatever the band
        (0.06, 0.05, 0.20, Verdict.INCONCLUSIVE),  # band 20% > threshold 5%: noise or not?
        (0.20, 0.05, 0.20, Verdict.INCONCLUSIVE),  # at the band's edge
        (0.21, 0.05, 0.20, Verdict.FAIL),  # past the band: not noise
        (0.30, 0.50, 0.50, Verdict.PASS),  # a threshold as wide as the band: never unsure
        (0.51, 0.50, 0.50, Verdict.FAIL),
    ],
)
def test_judge_drop(drop, threshold, band, verdict):
    assert judge_drop(drop, threshold, band) == verdict


@pytest.mark.parametrize(
    "ratio, maximum, band, verdict",
    [
        (0.5, 1.5, 0.0, Verdict.PASS),
        (1.5, 1.5, 0.0, Verdict.PASS),
        (1.51, 1.5, 0.0, Verdict.FAIL),
        (1.7, 1.5, 0.2, Verdict.INCONCLUSIVE),  # 1.5 < 1.7 <= 1.8
        (1.8, 1.5, 0.2, Verdict.INCONCLUSIVE),
        (1.81, 1.5, 0.2, Verdict.FAIL),
    ],
)
def test_judge_ratio(ratio, maximum, band, verdict):
    assert judge_ratio(ratio, maximum, band) == verdict


def test_pass_always_passes_and_fail_always_fails():
    for on_inconclusive in Action:
        for on_no_data in Action:
            assert action_of(Verdict.PASS, on_inconclusive, on_no_data) == Action.PASS
            assert action_of(Verdict.FAIL, on_inconclusive, on_no_data) == Action.FAIL


def test_inconclusive_and_no_data_do_what_the_thresholds_say():
    assert action_of(Verdict.INCONCLUSIVE, Action.NEEDS_HUMAN, Action.FAIL) == Action.NEEDS_HUMAN
    assert action_of(Verdict.INCONCLUSIVE, Action.PASS, Action.FAIL) == Action.PASS
    assert action_of(Verdict.NO_DATA, Action.NEEDS_HUMAN, Action.FAIL) == Action.FAIL
    assert action_of(Verdict.NO_DATA, Action.FAIL, Action.NEEDS_HUMAN) == Action.NEEDS_HUMAN


def test_a_re_measure_keeps_the_attempt_whose_action_ranks_higher():
    assert ACTION_RANK[Action.PASS] > ACTION_RANK[Action.NEEDS_HUMAN] > ACTION_RANK[Action.FAIL]
