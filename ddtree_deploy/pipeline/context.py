"""One host's run: its transport, its recorder, and the result it ends with."""

from __future__ import annotations

import datetime
import getpass
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op, OpResult
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_results import LockRecord, PlanResult
from ddtree_deploy.errors import (
    BecomeError,
    ConnectError,
    ContainerError,
    HostKeyError,
    PythonError,
    RouteError,
    TransportError,
)
from ddtree_deploy.events import HostRecorder, Stage
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline.op_reports import report_each_service, report_results
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.transport import Transport

# One op of a request and the stage its result is reported under.
Step = tuple[Stage, Op]


def new_run_id() -> str:
    """Return a fresh run id: 12 hex digits, the same on every event of one command."""
    return secrets.token_hex(6)


def controller_holder() -> str:
    """Who holds a lock: user@controller-host pid N (shown to a blocked second run)."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def holder_is_dead(lock: LockRecord | None) -> bool:
    """True when the lock's holder ran on this controller and its process is gone.

    A holder on another machine cannot be checked from here: it counts as alive.
    """
    pid = lock.get("pid") if lock else None
    if not lock or lock.get("controller") != socket.gethostname() or not pid:
        return False
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] == "Z"
    except (OSError, ValueError, IndexError):
        return True


def new_deploy_id(name: str, version: str) -> str:
    """Sortable by time: UTC stamp first."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{name}-{version}-{secrets.token_hex(3)}"


@dataclass
class HostRun:
    """Sends stage-tagged ops to one host and turns op results into stage events (what an
    op's answer says beside that is op_reports', one reporter per op).

    controller_pid/controller_machine: this controller's process id and machine name, as
    the host lock records them (default: this process on this machine).
    """

    host: Host
    transport: Transport
    recorder: HostRecorder
    run_id: str
    controller_pid: int = field(default_factory=os.getpid)
    controller_machine: str = field(default_factory=socket.gethostname)
    # What went wrong beside the work (housekeeping on the host): shown with the result.
    warnings: list[str] = field(default_factory=list)
    # The stage of the request in flight: a silent link is reported under it.
    stage_now: Stage = field(default=Stage.CONNECT, init=False)

    def __post_init__(self) -> None:
        self.transport.on_silence = self._tell_silence

    def _tell_silence(self, message: str, data: dict[str, object]) -> None:
        """An info event while the link is silent ("no answer from HOST for N s"; from the
        transport's keepalive watch, transport/alive.py), under the stage waiting on it."""
        self.recorder.info(self.stage_now, message, dict(data))

    def call(
        self,
        steps: Sequence[Step],
        judged: frozenset[Stage] = frozenset(),
        answered: AgentResponse | None = None,
    ) -> AgentResponse:
        """Send `steps` as one request; emit each stage's events; re-raise TransportError.

        The first stage starts when the request is sent. A later stage of the same request
        runs on the host while the controller waits, so its `start` comes with its answer;
        a stage whose ops were never reached (an earlier op failed) gets no event at all.
        A stage in `judged` whose ops succeeded gets no `ok`: the caller judges what they
        returned and ends the stage itself (the serving gate compares on the controller).
        `answered`: the host's answer to `steps` already in hand (their ops ran beside an
        earlier request's, e.g. the reference beside smoke): nothing is sent, the events
        are the same.
        """
        stages = list(dict.fromkeys(stage for stage, _ in steps))
        self.stage_now = stages[0]
        self.recorder.start(stages[0])
        request = AgentRequest(state_dir=self.host.state_dir, ops=[op for _, op in steps])
        try:
            response = self.transport.call(request) if answered is None else answered
        except TransportError as exc:
            self.recorder.fail(stages[0], str(exc))
            raise
        by_stage: dict[str, list[OpResult]] = {}
        for (stage, _), result in zip(steps, response.results, strict=False):
            by_stage.setdefault(stage, []).append(result)
        if stages[0] not in by_stage:  # the agent refused the whole request
            self.recorder.fail(stages[0], response.error or "no answer")
        if len(self.host.named_services()) > 1:
            report_each_service(self.recorder, steps, response.results)
        for stage in stages:
            results = by_stage.get(stage)
            if not results:
                continue
            if stage != stages[0]:
                self.recorder.start(stage)
            report_results(self.recorder, stage, results, self.warnings)
            duration_s = sum(r.duration_s for r in results)
            failed = next((r for r in results if not r.ok), None)
            if failed is not None:
                self.recorder.fail(stage, failed.error or "failed", duration_s=duration_s)
                continue
            if stage in judged:
                continue
            halted = next((r for r in results if r.halt), None)
            note = (halted.note or "") if halted is not None else ""
            self.recorder.ok(stage, note, duration_s=duration_s)
        return response

    def ask(
        self, steps: Sequence[Step], judged: frozenset[Stage] = frozenset()
    ) -> AgentResponse | HostResult:
        """Return the host's answer to `steps`, or the result the host ends with when the
        transport broke: the one place a TransportError becomes a result.

        A request that asked for the host lock and was lost after the host was reached
        releases the lock again (best effort: the agent may have taken it). So does one
        whose facts or check_plan answer cannot be read as its record (NEEDS_ATTENTION
        naming the error): the caller could not judge it, so it must not keep the lock.
        """
        locking = any(op.op == OpName.LOCK_ACQUIRE for _, op in steps)
        try:
            response = self.call(steps, judged)
        except TransportError as exc:
            if not isinstance(exc, ConnectError) and locking:
                self.release_lock()
            return unreachable_result(self, exc)
        try:
            response.facts()
            response.result_as(OpName.CHECK_PLAN, PlanResult)
        except WireError as exc:
            if locking:
                self.release_lock()
            return self.result(Outcome.NEEDS_ATTENTION, f"unreadable answer from the host: {exc}")
        return response

    def ask_quietly(self, steps: Sequence[Step]) -> AgentResponse | None:
        """Send `steps` without stage events (a stage still running asks the host again);
        None when the transport broke (the stage's own end says what happened)."""
        request = AgentRequest(state_dir=self.host.state_dir, ops=[op for _, op in steps])
        try:
            return self.transport.call(request)
        except TransportError:
            return None

    def try_call(self, steps: Sequence[Step]) -> AgentResponse | None:
        """Best effort: the host's answer, or None when the transport broke (events say so)."""
        try:
            return self.call(steps)
        except TransportError:
            return None

    def release_lock(self) -> bool:
        """Release this run's host lock as its own `unlock` stage; best effort.

        Returns True when the host answered and the release op succeeded.
        """
        response = self.try_call([(Stage.UNLOCK, ops.unlock_op(self.run_id))])
        return response is not None and response.ok

    def result(
        self,
        outcome: Outcome,
        message: str = "",
        *,
        deploy_id: str | None = None,
        version_now: str | None = None,
        details: HostDetails | None = None,
    ) -> HostResult:
        """Return this host's result, carrying every stage it finished so far."""
        if self.warnings:  # the summary shows them beside the message (report.summary)
            details = {**(details or HostDetails()), "warnings": list(self.warnings)}
        return HostResult(
            host=self.host.name,
            outcome=outcome,
            message=message,
            deploy_id=deploy_id,
            version_now=version_now,
            details=HostDetails() if details is None else details,
            records=self.recorder.records,
        )


def unreachable_result(run: HostRun, exc: TransportError) -> HostResult:
    """The host could not be talked to: a host key that is unknown or CHANGED (on any hop),
    a route ssh_config cannot give, a container whose agent cannot start, an inventory
    `python` the host cannot run, or sudo refusing
    to start the agent (details["become"] says how) is refused config (exit 2); anything
    else means the host needs attention (exit 3)."""
    if isinstance(exc, HostKeyError | RouteError | ContainerError | PythonError):
        return run.result(Outcome.REFUSED, f"refused: {exc}")
    if isinstance(exc, BecomeError):
        return run.result(Outcome.REFUSED, f"refused: {exc}", details={"become": exc.kind})
    return run.result(Outcome.NEEDS_ATTENTION, f"unreachable: {exc}")
