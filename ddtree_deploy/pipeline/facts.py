"""Read a host's facts in one round trip: the first request of every read-only command."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.serve_file import describe_serve_fact


def read_facts(run: HostRun, prepared: PreparedPatchset | None, stage: Stage) -> dict | HostResult:
    """Return the host's facts (the files of `prepared`, if given), reported under `stage`,
    or the result the host ends with: unreachable, or NEEDS_ATTENTION when facts failed.

    The serve file's raw text never leaves this function (it may hold an api key): its
    fact carries redacted `flags` and `args` instead.
    """
    response = run.ask([(stage, ops.facts_op(run.host, prepared))])
    if isinstance(response, HostResult):
        return response
    if not response.ok:
        error = response.failed.error if response.failed else response.error
        return run.result(Outcome.NEEDS_ATTENTION, f"facts failed: {error}")
    facts: dict[str, Any] = response.results[0].data
    if facts.get("serve"):
        facts["serve"] = describe_serve_fact(facts["serve"])
    return facts
