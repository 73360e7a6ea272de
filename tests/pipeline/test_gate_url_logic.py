"""`gate --url`'s verdicts with the measurement stubbed (no server): ok, failed (exit 1),
and a check that needs a human (exit 3, `needs_human` in the JSON)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ddtree_deploy.agent.host.wire_results import GateMeasurement
from ddtree_deploy.cli import app
from ddtree_deploy.pipeline import gate_url as url_gate
from tests.pipeline.test_push_gate import measurement

URL = "http://127.0.0.1:9"


@pytest.fixture
def baseline(tmp_path):
    path = tmp_path / "baseline.json"
    noisy = measurement("baseline", rates=(90.0, 100.0, 110.0))  # a 20% band
    path.write_text(json.dumps({**noisy, "prompts": [{"input_ids": [1, 2]}]}))
    return path


def measuring(monkeypatch, rate: float) -> None:
    """Every measurement of the URL answers at `rate` tokens/s (the check and re-measures)."""

    def measure(url, settings, phase, load, api_key_env=None):
        return GateMeasurement.from_dict(measurement(phase, rate), "stub")

    monkeypatch.setattr(url_gate, "measure_url", measure)


@pytest.mark.parametrize(
    "rate, ok, needs_human, code",
    [(100.0, True, False, 0), (85.0, False, True, 3), (40.0, False, False, 1)],
)
def test_gate_url_ok_failed_or_needs_a_human(monkeypatch, baseline, rate, ok, needs_human, code):
    measuring(monkeypatch, rate)
    result = url_gate.gate_url(URL, None, "quick", baseline, None)
    assert (result.ok, result.refused, result.needs_human) == (ok, False, needs_human)
    done = CliRunner().invoke(app, ["gate", "--url", URL, "--gate", "quick", "--baseline",
                                    str(baseline)])  # fmt: skip
    assert done.exit_code == code, done.output
    said = json.loads(done.stdout.strip().splitlines()[0])
    assert (said["ok"], said["needs_human"]) == (ok, needs_human)
