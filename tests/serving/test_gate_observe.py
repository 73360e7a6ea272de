"""--gate observe on a REAL sglang server: a patch the gate fails (the budget clamped to 1,
accept length 4 -> 2 on host1) is measured with every check of the full gate, the failed
check reported with what would have happened, and the push NOT rolled back; then the host
is rolled back by hand so the shared sandbox ends as it began. The enforcing control is
test_gate.py's test_fewer_accepted_drafts_are_caught_and_rolled_back (same variant, quick:
rolled back)."""

from __future__ import annotations

import pytest

from ddtree_sandbox.gate_fixtures import GATE_VARIANTS
from tests.serving.serving import events, summary
from tests.serving.test_gate import GATE, gate_checks

pytestmark = pytest.mark.hosts


@pytest.mark.serving_full  # make test-serving only: a full gate's load and bake on CPU
def test_observe_reports_the_failed_check_and_keeps_the_push(serving):
    clamp = GATE_VARIANTS["clamp"].version
    args = ("push", "-H", "host1", "-p", f"ddtree@{clamp}", "--gate", "observe", "--json")
    done = serving.cli(*args, gate=GATE)
    try:
        assert done.returncode == 0, done.stderr[-4000:]
        checks = gate_checks(done.stdout)["host1"]
        assert not checks["accept_length_ratio"]["passed"], checks
        assert {"health", "error_rate"} <= set(checks)  # full's load and bake ran
        said = [
            e for e in events(done.stdout)
            if e["host"] == "host1" and (e.get("data") or {}).get("observe")
        ]  # fmt: skip
        assert said and said[0]["data"]["observe"]["rolled_back"] is False
        assert "accept_length_ratio" in said[0]["data"]["observe"]["would_fail"]
        end = summary(done.stdout)["host1"]
        assert end["data"]["outcome"] == "ok"
        assert any("observe mode" in w for w in end["data"]["warnings"])
        assert '"rollback"' not in done.stdout  # no rollback stage at all
    finally:
        back = serving.cli("rollback", "-H", "host1")
        assert back.returncode == 0, back.stderr[-3000:]
        serving.assert_pristine("host1")
