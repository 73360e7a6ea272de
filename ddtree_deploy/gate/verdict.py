"""The gate's four verdicts, what each does, and the pure rules that pick them.

Argo Rollouts tells a Successful measurement from a Failed, an Inconclusive and an Error
one; Kayenta classifies a metric Pass, High/Low or Nodata. The gate does the same:

- PASS: the check holds.
- FAIL: it does not, by more than the run could mistake for noise.
- INCONCLUSIVE: the measured change lies between the threshold and the noise band (a band
  wider than the threshold cannot resolve it): the run cannot tell a regression from noise.
- NO_DATA: the check had nothing to compare (a side measured no tokens, no latencies, no
  requests, no /metrics text).

What a verdict does is the thresholds' choice (`on_inconclusive`, `on_no_data`): pass, fail,
or stop for a person (`needs_human`: exit 3, a push rolled back and flagged). PASS always
passes and FAIL always fails.
"""

from __future__ import annotations

from enum import StrEnum

SLACK = 1e-9  # a value exactly at its limit passes despite float rounding


class Verdict(StrEnum):
    """One check's verdict (the JSON report's `verdict`)."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    NO_DATA = "NO_DATA"


class Action(StrEnum):
    """What a verdict does to the run (the thresholds' `on_inconclusive`, `on_no_data`)."""

    PASS = "pass"
    FAIL = "fail"
    NEEDS_HUMAN = "needs_human"


# Which of two attempts at one check is kept: the one whose action ranks higher (a speed
# check fails only when no re-measure did better: pipeline/push_gate.py recheck_speed).
ACTION_RANK = {Action.FAIL: 0, Action.NEEDS_HUMAN: 1, Action.PASS: 2}


def action_of(verdict: Verdict, on_inconclusive: Action, on_no_data: Action) -> Action:
    """Return what `verdict` does: PASS passes, FAIL fails, the other two as configured."""
    if verdict == Verdict.PASS:
        return Action.PASS
    if verdict == Verdict.FAIL:
        return Action.FAIL
    return on_inconclusive if verdict == Verdict.INCONCLUSIVE else on_no_data


def judge_drop(drop: float, threshold: float, band: float) -> Verdict:
    """Return the verdict on a fall of `drop` (a fraction: 0.12 is 12% worse; negative is
    better) allowed up to `threshold`, on a run whose rounds spread by `band`.

    PASS within the threshold; FAIL beyond both the threshold and the band; in between
    (only when the band is wider than the threshold) INCONCLUSIVE.
    """
    if drop <= threshold + SLACK:
        return Verdict.PASS
    if drop > max(threshold, band) + SLACK:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def judge_ratio(ratio: float, maximum: float, band: float) -> Verdict:
    """Return the verdict on a new / old `ratio` allowed up to `maximum`, on a run whose
    rounds spread by `band`: PASS up to `maximum`, FAIL beyond `maximum` x (1 + band),
    INCONCLUSIVE in between."""
    if ratio <= maximum + SLACK:
        return Verdict.PASS
    if ratio > maximum * (1 + band) + SLACK:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE
