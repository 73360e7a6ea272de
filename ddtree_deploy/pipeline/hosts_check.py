"""`hosts check` for one host: can we reach it, and what does it run?"""

from __future__ import annotations

from typing import cast

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import describe_install, read_facts
from ddtree_deploy.pipeline.status import describe_container
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset


def hosts_check(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Reachability and facts (python, sglang version and where it is installed, file
    hashes, disk, GPUs, lock, whether the API key can be read), reported as the `check`
    stage; OK with the facts and the SSH route (each hop, jump hosts first) as details.

    With become, details["become"] is "ok" once the agent answered through sudo (facts'
    `user` says as whom); a refusal ends the host REFUSED with details["become"] naming
    it: password required, denied, unknown user, no sudo (pipeline.context).
    """
    found = read_facts(run, prepared, Stage.CHECK)
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    route = run.transport.route()
    via = f" via {' -> '.join(route[:-1])}" if len(route) > 1 else ""
    message = f"sglang {facts.package_version}{describe_install(facts)}{via}"
    for problem in (facts.locate_error, facts.api_key_error, facts.service_error):
        if problem:
            message += f"; {problem}"
    if facts.container is not None:
        message = f"{message}; {describe_container(facts.container)}"
    # every key of the facts as JSON is a HostDetails key (tests/test_results.py pins it)
    details = cast(HostDetails, found.to_dict() | {"route": route})
    if run.host.become:
        details["become"] = "ok"
    return run.result(Outcome.OK, message, details=details)
