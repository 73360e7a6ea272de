"""One rollback epilogue (pipeline/push_rollback.py `finish_rollback`): a failed request
and a lost connection end alike once the backup is restored: an old server restarted
under a serving gate must be back at its baseline, and the gate's checks are kept.

Against a scripted agent (no SSH); the failed-request paths are in test_push_gate.py.
"""

from __future__ import annotations

import pytest

from ddtree_deploy.results import Outcome
from tests.pipeline.fakehost import LOST, scene
from tests.pipeline.test_push_gate import GATE, gate_host, gated, measurement, push
from tests.pipeline.test_push_logic import (
    BACKUP,
    INSTALL,
    PREFLIGHT,
    RESTART,
    ROLLBACK,
    ROLLBACK_RESTART,
    SMOKE,
)


def test_lost_at_canary_confirms_the_baseline_after_the_restart():
    s = scene(
        gate_host(),
        gate_measure=[gated(measurement("baseline")), LOST, gated(measurement("rollback"))],
    )
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK, result.message
    assert result.message.startswith("canary: h1: connection lost")
    # the canary's replay is cut; over a fresh connection: restore + restart, then the replay
    assert s.fake.sent == [PREFLIGHT, BACKUP, GATE, INSTALL, SMOKE, RESTART, GATE,
                           ROLLBACK_RESTART, GATE]  # fmt: skip
    assert s.transport.closed == 1 and s.transport.stats.connects == 2
    checks = {c["name"]: c["passed"] for c in result.details["gate"]["checks"]}
    assert checks["rollback.tokens_per_s"] is True


@pytest.mark.parametrize(
    "script, said",
    [
        # verify's suites: the request is named by its first stage (restart, health, verify)
        ({"smoke": [None, LOST]}, "restart: h1: connection lost: EOF during smoke"),
        ({"gate_measure": [gated(measurement("baseline")), LOST]}, "canary: h1: connection lost"),
    ],
    ids=["verify", "canary"],
)
def test_lost_after_the_restart_and_the_old_server_not_back_needs_attention(script, said):
    slow = [gated(measurement("rollback", 50.0))] * 3  # the replay and both re-measures
    queue = script.get("gate_measure", [gated(measurement("baseline"))])
    s = scene(gate_host(), **{**script, "gate_measure": [*queue, *slow]})
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message.startswith(said)
    assert "but the old server is not back at its baseline: gate.tokens_per_s" in result.message
    assert s.fake.sent[-4:-3] == [ROLLBACK_RESTART] and s.fake.sent[-3:] == [GATE] * 3


def test_lost_before_the_restart_restarts_nothing_and_replays_nothing():
    s = scene(gate_host(), install=LOST, gate_measure=[gated(measurement("baseline"))])
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert s.fake.sent == [PREFLIGHT, BACKUP, GATE, INSTALL, ROLLBACK]  # no replay
    assert result.details["gate"]["baseline"]  # the gate's details kept, as for a failure
