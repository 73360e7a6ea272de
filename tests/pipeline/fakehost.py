"""A scripted host for pipeline logic tests: a FakeTransport that answers like the agent.

Every op succeeds with plausible data unless the script says otherwise for its key (the op
name; `journal:STATE` for journal ops). A script entry lists what the op does at each of
its occurrences in order (later ones succeed): a result name from fixtures/agent_results.json,
an OpResult, LOST (the connection breaks at the op, after the host was reached), BUSY
(the agent refuses the whole request), or on a container host NOT_STARTED / RELAY_LOST (the
relay could not start the container's agent / it died at the op). `connect: [UNREACHABLE]`
fails a request's connect; `connect: [AgentExit(...)]` is what the agent's process left
instead of an answer (sudo's refusal, a shell's "not found"): the FakeTransport hands it to
`Transport.call`, which reads it as the real transports' output is read. A smoke op with
`beside` suites answers for them too, as the agent does (SmokeResult.beside): passed, or
what the script's `smoke:beside` key says (a result name or an OpResult).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op, OpResult
from ddtree_deploy.agent.host import wire_container
from ddtree_deploy.errors import ConnectError, HostKeyError, TransportError
from ddtree_deploy.events import Event, HostRecorder
from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.transport import AgentExit, FakeTransport

RESULTS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "agent_results.json").read_text()
)
LOST, BUSY, UNREACHABLE, BAD_KEY = "<lost>", "<busy>", "<unreachable>", "<bad host key>"
NOT_STARTED, RELAY_LOST = "<container agent not started>", "<container agent lost>"
SERVICE = ServiceSpec(kind="command", start="/bin/true", stop="/bin/true")


def make_host(service: ServiceSpec = SERVICE, **kw: Any) -> Host:
    """A host the fake answers for: a `command` service unless told otherwise."""
    return Host(name="h1", address="10.0.0.1", service=service, **kw)


def op_key(op: Op) -> str:
    """The script key of an op: its name, or `journal:STATE`."""
    return f"journal:{op.args['entry']['state']}" if op.op == "journal" else op.op


def result_named(name: str) -> OpResult:
    """An op result from fixtures/agent_results.json."""
    return OpResult.model_validate(RESULTS[name])


def passed_suites(suites: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A passed result line for each suite of a smoke op's args."""
    return [{"suite": s["name"], "passed": True, "checks": []} for s in suites]


def relay_refusal(behaviour: str, results: list[OpResult]) -> AgentResponse:
    """A container host's relay answer when the container's agent could not be started
    (nothing ran) or died at an op (what ran before it is kept), as relay.py answers."""
    if behaviour == NOT_STARTED:
        code, error = wire_container.NOT_STARTED, "container 'sglang' is not running"
    else:
        code, error = wire_container.AGENT_LOST, "in container 'sglang' (docker exec, exit 137)"
    return AgentResponse(ok=False, results=results, error=error, code=code)


@dataclass
class FakeHost:
    """The scripted agent: `handle` is the FakeTransport handler; `sent` the op keys of
    every request, in order, and `requests` the requests themselves."""

    host: Host
    script: dict[str, list[Any]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    sent: list[list[str]] = field(default_factory=list)
    requests: list[AgentRequest] = field(default_factory=list)

    def handle(self, request: AgentRequest) -> AgentResponse | AgentExit:
        keys = [op_key(op) for op in request.ops]
        self.sent.append(keys)
        self.requests.append(request)
        connect = self._next("connect")
        if connect == UNREACHABLE:
            raise ConnectError(self.host.name, "cannot connect to 10.0.0.1:22: refused")
        if connect == BAD_KEY:
            raise HostKeyError(self.host.name, "host key CHANGED for 10.0.0.1:22; refusing")
        if isinstance(connect, AgentExit):
            return connect
        results = []
        for op, key in zip(request.ops, keys, strict=True):
            behaviour = self._next(key)
            if behaviour == LOST:
                raise TransportError(self.host.name, f"connection lost: EOF during {key}")
            if behaviour == BUSY:
                return AgentResponse(ok=False, results=[], error="another agent is still working")
            if behaviour in (NOT_STARTED, RELAY_LOST):
                return relay_refusal(behaviour, results)
            result = self._result(op, behaviour)
            results.append(result)
            if not result.ok or result.halt:
                break
        return AgentResponse(ok=all(r.ok for r in results), results=results)

    def _next(self, key: str) -> Any:
        queue = self.script.get(key)
        return queue.pop(0) if queue else None

    def _result(self, op: Op, behaviour: Any) -> OpResult:
        if isinstance(behaviour, OpResult):
            return behaviour
        if isinstance(behaviour, str):
            return result_named(behaviour)
        data: Any = {}
        if op.op == "facts":
            data = {**RESULTS["facts"]["data"], **self.facts}
        elif op.op == "check_plan":
            data = {"files": {f["path"]: "patched" for f in op.args["files"]}}
        elif op.op == "lock_acquire":
            data = {"lock": {"run_id": op.args["run_id"], "holder": op.args["holder"]}}
        elif op.op == "smoke":
            data = {"suites": passed_suites(op.args["suites"])}
            if op.args.get("beside"):
                scripted = self._next("smoke:beside")
                beside = self._result(op, scripted) if scripted is not None else OpResult(
                    op="smoke", ok=True, data={"suites": passed_suites(op.args["beside"])},
                )  # fmt: skip
                data["beside"] = beside.model_dump()
        elif op.op == "prune":
            data = {"removed": ["old-1"], "kept": []}
        elif op.op == "restore":  # a Restored, as the agent answers (wire_outcomes.py)
            backup = f"/state/backups/{op.args['deploy_id']}"
            data = {"files": {}, "backup": backup, "drift": [], "drift_saved": None,
                    "unchecked": []}  # fmt: skip
        elif op.op == "drift":  # a DriftResult: the deploy asked about, no hand edits
            data = {"deploy_id": op.args.get("deploy_id"), "drift": [], "unchecked": [],
                    "error": None, "files": []}  # fmt: skip
        return OpResult(op=op.op, ok=True, data=data, duration_s=0.01)


@dataclass
class Scene:
    """One host run against a FakeHost: what was sent, which events came out."""

    run: HostRun
    fake: FakeHost
    transport: FakeTransport
    events: list[Event]

    def stages(self, kind: str | None = None) -> list[str]:
        """`stage event` for every non-info event (or only those of `kind`), in order."""
        return [
            f"{e.stage} {e.event}" if kind is None else e.stage
            for e in self.events
            if e.event != "info" and (kind is None or e.event == kind)
        ]

    def infos(self) -> list[str]:
        return [f"{e.stage}: {e.message}" for e in self.events if e.event == "info"]

    def check_events_paired(self) -> None:
        """Every `start` is followed by its stage's ok/fail before anything else starts."""
        open_stage = None
        for e in self.events:
            if e.event == "start":
                assert open_stage is None, f"{e.stage} started while {open_stage} runs"
                open_stage = e.stage
            elif e.event in ("ok", "fail"):
                assert open_stage == e.stage, f"{e.stage} {e.event} without its start"
                open_stage = None
        assert open_stage is None, f"{open_stage} started and never ended"


def scene(host: Host | None = None, **script: Any) -> Scene:
    """A HostRun on a FakeHost with this script (op key -> behaviours, or one behaviour)."""
    host = host or make_host()
    facts = script.pop("facts_data", {})
    queues = {k: list(v) if isinstance(v, list) else [v] for k, v in script.items()}
    fake = FakeHost(host, queues, facts)
    events: list[Event] = []
    transport = FakeTransport(host, fake.handle)
    recorder = HostRecorder(host=host.name, run_id="r1", sink=events.append)
    run = HostRun(host=host, transport=transport, recorder=recorder, run_id="r1")
    return Scene(run, fake, transport, events)
