"""FleetResult's views: every selected host lands in exactly one of succeeded, failed and
not_started (library callers read them; the CLI reads the results and the exit codes)."""

from __future__ import annotations

from ddtree_deploy.fleet.run import FleetResult
from ddtree_deploy.results import HostResult, Outcome


def test_each_host_is_in_exactly_one_view():
    outcomes = list(Outcome)
    results = [HostResult(host=f"h{i}", outcome=o) for i, o in enumerate(outcomes)]
    fleet = FleetResult(results=results, waves=[])
    views = (fleet.succeeded, fleet.failed, fleet.not_started)
    assert sorted(r.host for view in views for r in view) == sorted(r.host for r in results)
    assert {r.outcome for r in fleet.succeeded} == {Outcome.OK, Outcome.NO_CHANGES}
    assert {r.outcome for r in fleet.not_started} == {Outcome.NOT_STARTED}
    assert Outcome.ROLLED_BACK in {r.outcome for r in fleet.failed}
