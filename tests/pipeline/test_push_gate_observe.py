"""--gate observe inside push_host, against a scripted agent: every check of the full gate
is measured and reported, a failed one is said (would have failed, not rolled back) and the
push goes on. Each test's negative control runs the same script under an enforcing mode,
which must roll back: without observe mode's branch these tests fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from ddtree_deploy.agent import OpResult
from ddtree_deploy.cli.options import GateChoice, gate_mode
from ddtree_deploy.gate.settings import GateConfig, resolve
from ddtree_deploy.pipeline import PushOptions
from ddtree_deploy.report.junit import junit_xml
from ddtree_deploy.report.summary import summary_markdown
from ddtree_deploy.report.tables import gate_table
from ddtree_deploy.results import Outcome
from tests.pipeline.fakehost import make_host, scene
from tests.pipeline.test_push_gate import PROMPTS, gated, measurement, push
from tests.pipeline.test_push_logic import (
    BACKUP,
    COMMIT,
    INSTALL,
    OPTS,
    PREFLIGHT,
    RESTART,
    ROLLBACK,
    ROLLBACK_RESTART,
    SMOKE,
)

GATE = ["gate_measure"]
LOAD = {
    "requests": 40, "errors": 0, "first_error": None, "tokens": 2560, "wall_s": 30.0,
    "latencies_s": [0.5] * 40, "health_polls": 15, "health_failures": 0,
    "first_health_failure": None, "stopped_early": None,
}  # fmt: skip


def opts(mode: str) -> PushOptions:
    return PushOptions(holder="t", smoke_sources=OPTS.smoke_sources, gate_mode=mode)  # type: ignore[arg-type]


def gate_host() -> Any:
    return make_host(gate=GateConfig(requests=40, bake_s=30), gate_prompts=PROMPTS)


def slow_script() -> dict[str, Any]:
    """A baseline, then a new server at half the speed on every replay (and the rollback's
    replay back at the baseline, for the enforcing control)."""
    return {
        "gate_measure": [
            gated(measurement("baseline")),
            gated(measurement("after", 50.0, load=LOAD)),
            gated(measurement("retry-2", 52.0)),
            gated(measurement("retry-3", 49.0)),
            gated(measurement("rollback", 99.0)),
        ]
    }


def test_observe_reports_a_failed_check_and_does_not_roll_back():
    s = scene(gate_host(), **slow_script())
    result = push(s, opts("observe"))
    assert result.outcome == Outcome.OK, result.message
    assert result.message == "deployed"
    # the speed check was re-measured as full does, then the push committed: no restore
    assert s.fake.sent == [
        PREFLIGHT, BACKUP, GATE, INSTALL, SMOKE, RESTART, GATE, GATE, GATE, COMMIT
    ]  # fmt: skip
    assert all("restore" not in keys for keys in s.fake.sent)
    gate = result.details["gate"]
    assert gate["observe"] == {
        "would_fail": ["tokens_per_s", "p95_latency_ratio"],
        "rolled_back": False,
    }
    checks = {c["name"]: c["passed"] for c in gate["checks"]}
    assert checks["tokens_per_s"] is False and checks["greedy_match"] is True
    said = [i for i in s.infos() if "observe mode" in i]
    assert said == [
        next(
            i for i in said if i.startswith("canary: observe mode: gate failed: gate.tokens_per_s")
        )
    ]
    assert said[0].endswith("; not rolled back")
    assert "canary ok" in s.stages() and "canary fail" not in s.stages()
    assert any("observe mode: gate failed" in w for w in result.details["warnings"])
    assert "not rolled back" in result.shown_message


@pytest.mark.parametrize("mode", ["full", "quick"])
def test_control_an_enforcing_mode_rolls_back_on_the_same_failure(mode):
    s = scene(gate_host(), **slow_script())
    result = push(s, opts(mode))
    assert result.outcome == Outcome.ROLLED_BACK
    assert ROLLBACK_RESTART in s.fake.sent
    assert "observe" not in result.details["gate"]


def test_observe_measures_what_full_measures():
    """The load and bake of full run under observe too (quick would send none)."""
    sent_args = {}
    for mode in ("observe", "full"):
        s = scene(gate_host(), gate_measure=[gated(measurement("baseline")), gated(measurement())])
        push(s, opts(mode))
        canary = [op for r in s.transport.requests for op in r.ops if op.op == "gate_measure"][1]
        sent_args[mode] = {k: v for k, v in canary.args.items() if k not in ("phase", "save_as")}
    assert sent_args["observe"] == sent_args["full"]
    assert sent_args["observe"]["load_requests"] == 40 and sent_args["observe"]["bake_s"] == 30


def test_observe_with_a_passing_gate_says_nothing_would_have_failed():
    s = scene(gate_host(), gate_measure=[gated(measurement("baseline")), gated(measurement())])
    result = push(s, opts("observe"))
    assert result.outcome == Outcome.OK
    assert result.details["gate"]["observe"] == {"would_fail": [], "rolled_back": False}
    assert "warnings" not in result.details


def test_observe_goes_on_without_a_usable_baseline():
    s = scene(
        gate_host(),
        gate_measure=[gated(measurement("baseline", errors=2)), gated(measurement())],
    )
    result = push(s, opts("observe"))
    assert result.outcome == Outcome.OK, result.message
    assert s.fake.sent == [PREFLIGHT, BACKUP, GATE, INSTALL, SMOKE, RESTART, GATE, COMMIT]
    assert result.details["gate"]["observe"]["would_fail"] == ["baseline"]
    assert any(i.startswith("baseline: observe mode: no usable baseline") for i in s.infos())
    assert "baseline ok" in s.stages() and "canary ok" in s.stages()


def test_control_an_unusable_baseline_stops_a_full_gate():
    s = scene(gate_host(), gate_measure=[gated(measurement("baseline", errors=2))])
    result = push(s, opts("full"))
    assert result.outcome == Outcome.ROLLED_BACK
    assert s.fake.sent == [PREFLIGHT, BACKUP, GATE, ROLLBACK]


def test_observe_still_rolls_back_a_failure_that_is_not_the_gates():
    s = scene(
        gate_host(),
        gate_measure=[gated(measurement("baseline")), gated(measurement("rollback"))],
        smoke=["smoke_failed"],
    )
    result = push(s, opts("observe"))
    assert result.outcome == Outcome.ROLLED_BACK


def test_observe_reports_say_what_would_have_failed():
    s = scene(gate_host(), **slow_script())
    result = push(s, opts("observe"))
    xml = junit_xml("push", [result])
    assert 'name="gate.tokens_per_s"' in xml and "<failure" not in xml.split("gate.")[-1]
    assert "observe mode, not rolled back: would have failed" in xml
    assert "(observe: not rolled back)" in summary_markdown("push", [result])
    table = gate_table([result])
    assert table is not None
    cells = [str(c) for col in table.columns for c in col._cells]
    assert any("observe: not rolled back" in c for c in cells)


def test_control_reports_of_an_enforced_failure_fail():
    s = scene(gate_host(), **slow_script())
    result = push(s, opts("full"))
    assert "<failure" in junit_xml("push", [result]).split("gate.tokens_per_s")[-1]
    assert "(observe" not in summary_markdown("push", [result])


def test_gate_observe_option_and_settings():
    assert gate_mode(GateChoice("observe")) == "observe"
    settings = resolve(GateConfig(requests=8), PROMPTS, "observe")
    assert settings.loads and not settings.enforced
    assert resolve(GateConfig(requests=8), PROMPTS, "full").enforced
    assert GateConfig(mode="observe").mode == "observe"  # an inventory may set it too


@pytest.mark.parametrize("mode, outcome", [("observe", Outcome.OK), ("full", Outcome.ROLLED_BACK)])
def test_a_measurement_that_cannot_run_stops_only_an_enforcing_gate(mode, outcome):
    broken = OpResult(op="gate_measure", ok=False, code="exception", error="ConnectionRefused")
    s = scene(
        gate_host(),
        gate_measure=[gated(measurement("baseline")), broken, gated(measurement("rollback"))],
    )
    result = push(s, opts(mode))
    assert result.outcome == outcome, result.message
    if mode == "observe":
        assert s.fake.sent[-1] == COMMIT
        assert result.details["gate"]["observe"]["would_fail"] == ["canary"]
        assert any("canary: observe mode: measurement failed" in i for i in s.infos())
    else:
        assert ROLLBACK_RESTART in s.fake.sent
