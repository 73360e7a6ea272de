"""The `gate` command's verdicts (pipeline/gate.py gate_host) against a scripted agent and a
baseline file: OK, FAILED (exit 1), NEEDS_ATTENTION when a check needs a human (exit 3)."""

from __future__ import annotations

import json

from ddtree_deploy.pipeline import GateOptions, gate_host
from ddtree_deploy.results import Outcome
from tests.pipeline.fakehost import scene
from tests.pipeline.test_push_gate import gate_host as gated_host
from tests.pipeline.test_push_gate import gated, measurement

NOISY = (90.0, 100.0, 110.0)  # the baseline's rounds spread 20%


def judge(tmp_path, now: list[dict], **gate):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(measurement("baseline", rates=NOISY)))
    s = scene(gated_host(**gate), gate_measure=[gated(m) for m in now])
    return gate_host(s.run, None, GateOptions(mode="quick", baseline=baseline))


def test_a_server_as_good_as_its_baseline_is_ok(tmp_path):
    result = judge(tmp_path, [measurement("check", 100.0)])
    assert result.outcome == Outcome.OK, result.message


def test_an_inconclusive_check_needs_a_human(tmp_path):
    """-15% inside a 20% band: INCONCLUSIVE (today's code said OK), exit 3 by default."""
    result = judge(tmp_path, [measurement("check", 85.0)] * 3)  # the check and 2 re-measures
    assert result.outcome == Outcome.NEEDS_ATTENTION, result.message
    assert result.message.startswith("gate needs a human against --baseline ")
    assert "gate.tokens_per_s: tokens/s 100.0 -> 85.0 (-15.0%): inconclusive" in result.message
    verdicts = {c["name"]: c["verdict"] for c in result.details["gate"]["checks"]}
    assert verdicts["tokens_per_s"] == "INCONCLUSIVE"


def test_on_inconclusive_fail_fails_it_and_a_real_slowdown_fails_anyway(tmp_path):
    assert judge(tmp_path, [measurement("check", 85.0)] * 3, on_inconclusive="fail").outcome == (
        Outcome.FAILED
    )
    assert judge(tmp_path, [measurement("check", 40.0)] * 3).outcome == Outcome.FAILED
