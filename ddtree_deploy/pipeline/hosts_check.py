"""`hosts check` for one host: can we reach it, and what does it run?"""

from __future__ import annotations

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import describe_install, read_facts
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset


def hosts_check(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Reachability and facts (python, sglang version and where it is installed, file
    hashes, disk, GPUs, lock, whether the API key can be read), reported as the `check`
    stage; OK with the facts as details."""
    found = read_facts(run, prepared, Stage.CHECK)
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    message = f"sglang {facts.package_version}{describe_install(facts)}"
    for problem in (facts.locate_error, facts.api_key_error):
        if problem:
            message += f"; {problem}"
    return run.result(Outcome.OK, message, details=found.to_dict())
