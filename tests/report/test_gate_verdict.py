"""A gate check's result cell: its verdict and, for INCONCLUSIVE and NO_DATA, what the
thresholds made it do; checks recorded before verdicts existed read as before."""

from __future__ import annotations

import pytest

from ddtree_deploy.report.gate_verdict import verdict_style, verdict_words


@pytest.mark.parametrize(
    "check, observed, words, style",
    [
        ({"verdict": "PASS", "action": "pass", "passed": True}, False, "passed", "green"),
        ({"verdict": "FAIL", "action": "fail", "passed": False}, False, "FAILED", "red"),
        (
            {"verdict": "INCONCLUSIVE", "action": "needs_human", "passed": False},
            False,
            "INCONCLUSIVE (needs a human)",
            "yellow",
        ),
        (
            {"verdict": "INCONCLUSIVE", "action": "pass", "passed": True},
            False,
            "INCONCLUSIVE (passed)",
            "green",
        ),
        (
            {"verdict": "NO_DATA", "action": "fail", "passed": False},
            False,
            "NO DATA (failed)",
            "red",
        ),
        (
            {"verdict": "FAIL", "action": "fail", "passed": False},
            True,
            "FAILED (observe: not rolled back)",
            "red",
        ),
        ({"passed": True}, False, "passed", "green"),  # an older report: no verdict
        ({"passed": False}, False, "FAILED", "red"),
    ],
)
def test_verdict_words_and_style(check, observed, words, style):
    assert verdict_words(check, observed) == words
    assert verdict_style(check) == style
