"""`export --verify` with a server: the serving gate of the image's server against the
BASE image's server, the comparison a push's gate makes between the old server and the
new one (docs/gate.md).

The base image runs as the operator runs it today: the server args they gave, without the
patchset's [serve] flags, the same python, GPUs and their own mounts and environment (not
the mounts of the files under test). It is measured as a push measures the old server
(stage `baseline`: warm-up, the gate's prompts replayed greedily `rounds` times) and
removed; once the image's own server passed the `server` suite, it is measured the same
way (stage `canary`; `full` adds the load and bake) and the push's own verdicts judge the
pair (pipeline/push_gate.py PushGate: gate/compare.py's checks, a failing speed check
re-measured `retries` times before it counts). The two servers run one after the other on
the same host network and port. Nothing here compares anything itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ddtree_deploy.agent import AgentResponse
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_results import GateMeasurement
from ddtree_deploy.events import Stage
from ddtree_deploy.gate.settings import GateSettings
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.image_serve import wait_healthy
from ddtree_deploy.pipeline.push_gate import PushGate
from ddtree_deploy.results import HostResult
from ddtree_deploy.stages.gate_plan import gate_op


@dataclass(frozen=True)
class BaseImage:
    """The base image the gate measures: a loadable tarball, the tag it is loaded as,
    and its container's mounts and environment (the operator's own)."""

    tarball: str
    tag: str
    mounts: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def measure_baseline(run: HostRun, settings: GateSettings) -> tuple[PushGate | None, str]:
    """Wait for the base image's server (the container of `run.host`) and measure it
    (stage baseline); return the gate holding its baseline, or None and why not (it did
    not start, could not be measured, or gave no usable baseline: errors, no tokens)."""
    unhealthy = wait_healthy(run)
    if unhealthy is not None:
        return None, f"the base image's server: {unhealthy}"
    response = run.ask([(Stage.BASELINE, gate_op(run.host, settings, "baseline", load=False))])
    problem = _unmeasured(response)
    if problem is not None:
        return None, f"the base image's server could not be measured: {problem}"
    assert isinstance(response, AgentResponse)
    gate = PushGate(run, settings)
    why = gate.judge_baseline(response)
    return (None, f"the base image's server: {why}") if why else (gate, "")


def judge_image(run: HostRun, baseline: PushGate) -> tuple[PushGate, str | None]:
    """Measure the image's server (the container of `run.host`, healthy and past the
    server suite; stage canary) and compare it with the baseline; return the gate (its
    checks) and why it failed, or None when every check passed."""
    gate = PushGate(run, baseline.settings, baseline=baseline.baseline)
    op = gate_op(run.host, gate.settings, "canary", load=True)
    response = run.ask([(Stage.CANARY, op)])
    problem = _unmeasured(response)
    if problem is not None:
        return gate, f"the image's server could not be measured: {problem}"
    assert isinstance(response, AgentResponse)
    return gate, gate.judge_canary(response)


def _unmeasured(response: AgentResponse | HostResult) -> str | None:
    """Why `response` holds no measurement (the transport broke, the op failed, its data
    is not one), or None when it holds one."""
    if isinstance(response, HostResult):
        return response.message or "no answer"
    try:
        measured = response.result_as(OpName.GATE_MEASURE, GateMeasurement)
    except WireError as exc:
        return f"not a gate measurement: {exc}"
    if measured is None:
        failed = response.failed
        return (failed.error if failed else response.error) or "no answer"
    return None
