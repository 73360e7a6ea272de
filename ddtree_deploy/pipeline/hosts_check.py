"""`hosts check` for one host: can we reach it, and what does it run?"""

from __future__ import annotations

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.status import describe_container
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset


def hosts_check(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Reachability and facts (python, sglang version, file hashes, disk, GPUs, lock),
    reported as the `check` stage; OK with the facts as details."""
    found = read_facts(run, prepared, Stage.CHECK)
    if isinstance(found, HostResult):
        return found
    message = f"sglang {found.facts.package_version}"
    if found.facts.container is not None:
        message = f"{message}; {describe_container(found.facts.container)}"
    return run.result(Outcome.OK, message, details=found.to_dict())
