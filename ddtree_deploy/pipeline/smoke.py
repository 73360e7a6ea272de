"""`smoke` for one host: run the suites against what is installed now; read-only."""

from __future__ import annotations

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts, unusable_install
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.smoke_results import (
    describe_smoke_failure,
    describe_suite,
    suite_results,
)


def smoke_host(run: HostRun, prepared: PreparedPatchset, sources: dict[str, str]) -> HostResult:
    """Run the smoke suites in `sources` against what is installed now; read-only.

    Emits one `smoke` info event per suite (data: the suite's result line) and returns the
    results as details["suites"]; the outcome is FAILED when any suite failed.
    """
    found = read_facts(run, prepared, Stage.PREFLIGHT)
    if isinstance(found, HostResult):
        return found
    if (why := unusable_install(found.facts)) is not None:
        return run.result(Outcome.REFUSED, why)
    site, timeout_s = found.facts.package_root, prepared.smoke_timeout_s
    response = run.ask([(Stage.SMOKE, ops.smoke_op(run.host, site, prepared, sources, timeout_s))])
    if isinstance(response, HostResult):
        return response
    if not response.results:  # the agent refused the request as a whole
        return run.result(Outcome.NEEDS_ATTENTION, f"smoke not run: {response.error}")
    result = response.results[0]
    suites = suite_results(result)
    for suite in suites:
        run.recorder.info(Stage.SMOKE, describe_suite(suite), data=suite)
    outcome = Outcome.OK if result.ok else Outcome.FAILED
    message = describe_smoke_failure(suites) or result.error or "all suites passed"
    return run.result(outcome, message, details={"suites": suites})
