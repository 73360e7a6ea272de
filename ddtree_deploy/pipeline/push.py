"""`push` for one host: one round trip per row of PUSH_REQUESTS, and automatic rollback
when any request from install on fails (docs/architecture.md, "One push, round trips");
how a rollback ends is pipeline/push_rollback.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from ddtree_deploy.agent import AgentResponse, OpResult
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import Code, OpName
from ddtree_deploy.agent.host.wire_outcomes import LockRefusal, LockTaken
from ddtree_deploy.agent.host.wire_results import LockRecord, PlanResult
from ddtree_deploy.errors import ConfigError, TransportError
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun, Step, holder_is_dead, new_deploy_id
from ddtree_deploy.pipeline.push_gate import PushGate
from ddtree_deploy.pipeline.push_rollback import roll_back_lost, roll_back_push
from ddtree_deploy.pipeline.push_steps import PushOptions, PushSteps
from ddtree_deploy.pipeline.traffic import Traffic
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.gate_plan import plan_gate
from ddtree_deploy.stages.prepared import check_smoke_sources
from ddtree_deploy.stages.smoke_results import beside_answer, describe_suite, suite_results


class OnFail(StrEnum):
    """What a failed request means for the host."""

    REFUSE = "refuse"  # nothing changed: the preflight's code says how the host ends
    UNTOUCHED = "untouched"  # nothing installed: release the lock, site-packages as before
    ROLL_BACK = "roll_back"  # site-packages may have changed: restore the backup
    IGNORE = "ignore"  # best effort: an info event says what is missing, the push goes on


@dataclass(frozen=True)
class Request:
    """One round trip of a push: the ops of its stages, in order, stopping at the first
    failed op; a stage with no ops for this push is left out, an empty request not sent.

    `joins`: the first stage of a later request this one is sent together with when every
    request between them is empty and skips nothing (`coalesce`): one round trip less where
    the controller has nothing to do in between. `untouched`: the stages of a joined
    request whose failure still means `UNTOUCHED` (nothing installed yet).
    """

    stages: tuple[Stage, ...]
    on_fail: OnFail = OnFail.ROLL_BACK
    joins: Stage | None = None
    untouched: tuple[Stage, ...] = ()
    is_joined: bool = False

    def joined(self, later: Request) -> Request:
        """This request and `later` as one round trip: ops in order, each part's on_fail."""
        untouched = self.stages if self.on_fail == OnFail.UNTOUCHED else self.untouched
        return Request(self.stages + later.stages, later.on_fail, later.joins, untouched, True)

    def on_fail_at(self, stage: Stage) -> OnFail:
        """What a failure of `stage`'s ops means (a joined request's parts differ)."""
        return OnFail.UNTOUCHED if stage in self.untouched else self.on_fail


PUSH_REQUESTS: tuple[Request, ...] = (
    # facts, check_plan (halts: no changes), lock_acquire
    Request((Stage.PREFLIGHT,), OnFail.REFUSE),
    # backup (manifest written last, verified), journal `installing`; with install and
    # compile when there is no baseline to measure
    Request((Stage.BACKUP, Stage.JOURNAL), OnFail.UNTOUCHED, joins=Stage.INSTALL),
    # the serving gate: the old server's numbers, before anything is installed
    Request((Stage.BASELINE,)),
    Request((Stage.INSTALL, Stage.COMPILE)),
    # the patchset's suites, if it names any
    Request((Stage.SMOKE,)),
    # [lossless] patchsets: the `server` suite records the old server's outputs
    Request((Stage.REFERENCE,), OnFail.IGNORE),
    # with a service to restart: restart, health, the after-restart suites; with the
    # commit when there is no canary to judge
    Request((Stage.RESTART, Stage.HEALTH, Stage.VERIFY), joins=Stage.COMMIT),
    # the serving gate: the new server against the baseline (replay, load, bake)
    Request((Stage.CANARY,)),
    # journal `committed`, lock_release, prune old backups
    Request((Stage.COMMIT, Stage.UNLOCK, Stage.PRUNE)),
)

_REFUSALS: dict[str, Outcome] = {  # Code is a str Enum: it looks up by value
    Code.VERSION_MISMATCH: Outcome.REFUSED,
    Code.DRIFT: Outcome.REFUSED,
    Code.UNSAFE_PATH: Outcome.REFUSED,
    Code.PACKAGE_NOT_FOUND: Outcome.REFUSED,
    Code.API_KEY_UNREADABLE: Outcome.REFUSED,
    Code.SERVICE_NOT_FOUND: Outcome.REFUSED,
    Code.PENDING_RECOVERY: Outcome.NEEDS_ATTENTION,
    Code.LOCKED: Outcome.LOCKED,
}


def push_host(run: HostRun, prepared: PreparedPatchset, opts: PushOptions) -> HostResult:
    """Deploy one patchset to one host; never leaves it half-patched.

    OK (deployed), NO_CHANGES, REFUSED/LOCKED/NEEDS_ATTENTION from preflight (nothing
    changed), ROLLED_BACK after a failed request, or NEEDS_ATTENTION when the rollback
    itself failed (the message says what to run).
    """
    push = begin_push(run, prepared, opts)
    if isinstance(push, HostResult):
        return push
    changes = Changes.of(push)
    for request in coalesce(push, PUSH_REQUESTS[1:]):
        if (ended := changes.send(request)) is not None:
            return ended
    return changes.done()


def coalesce(push: PushSteps, requests: Sequence[Request]) -> list[Request]:
    """`requests` with each one that `joins` a later one sent together with it, when it
    sends ops and every request between them sends none and skips nothing (no serving
    gate, no skipped restart): the controller has nothing to judge or report in between,
    so the host may go straight on. The ops, their order and what a failure of each means
    stay the same; only the round trips drop (5 to 3 for a push with suites [])."""
    out: list[Request] = []
    i = 0
    while i < len(requests):
        request = requests[i]
        end = next(
            (j for j in range(i + 1, len(requests)) if requests[j].stages[0] == request.joins),
            None,
        )
        if end is not None and push.steps(request.stages) and _idle(push, requests[i + 1 : end]):
            out.append(request.joined(requests[end]))
            i = end + 1
            continue
        out.append(request)
        i += 1
    return out


def _idle(push: PushSteps, requests: Sequence[Request]) -> bool:
    """Whether none of `requests` sends an op or reports a skipped stage in this push."""
    stages = [stage for request in requests for stage in request.stages]
    return not push.steps(tuple(stages)) and all(push.skip_reason(s) is None for s in stages)


def begin_push(
    run: HostRun, prepared: PreparedPatchset, opts: PushOptions
) -> PushSteps | HostResult:
    """The push's preflight (facts, plan, lock): the push's steps once it passed, else how
    the host ends (nothing changed; REFUSED for bad input, e.g. a suite without a source)."""
    try:
        serve = ops.plan_serve_file(run.host, prepared)
        gate = plan_gate(run.host, prepared, opts.gate_mode)
        named = (*prepared.suites, *prepared.after_restart)
        check_smoke_sources(named, opts.smoke_sources or {}, prepared.ref)
    except (ValueError, ConfigError) as exc:
        return run.result(Outcome.REFUSED, str(exc))
    if serve is not None:
        run.recorder.info(Stage.PREFLIGHT, f"serve flags: {serve.describe()}")
    push = PushSteps(run, prepared, opts, serve, gate)
    pre = run.ask(push.steps(PUSH_REQUESTS[0].stages))
    if isinstance(pre, HostResult):
        return pre
    refused = _judge_preflight(run, prepared, pre)
    if refused is not None:
        return refused
    facts, plan = pre.facts(), pre.result_as(OpName.CHECK_PLAN, PlanResult)
    # Preflight passed: facts and check_plan answered, and check_plan found the target
    # version installed where Python imports it (so the package root is known).
    assert facts is not None and facts.package_root is not None and plan is not None
    taken = pre.result_as(OpName.LOCK_ACQUIRE, LockTaken)
    replaced = taken.lock.get("replaced") if taken is not None else None
    if replaced:
        run.recorder.info(
            Stage.PREFLIGHT, f"--break-lock: took over the lock of {_holder(replaced)}"
        )
    return dataclasses.replace(
        push,
        site=facts.package_root,
        plan=plan.files,
        deploy_id=new_deploy_id(prepared.name, prepared.version),
        container=facts.container,
    )


def _judge_preflight(
    run: HostRun, prepared: PreparedPatchset, pre: AgentResponse
) -> HostResult | None:
    """Return how the host ends when preflight stops the push (nothing changed), else None."""
    facts = pre.facts()
    if facts is None:
        if pre.failed is not None and pre.failed.code == Code.UNSAFE_PATH:  # the state dir
            return run.result(Outcome.REFUSED, _error(pre))
        return run.result(Outcome.NEEDS_ATTENTION, f"facts failed: {_error(pre)}")
    halted = pre.halted
    if halted is not None and halted.code == Code.NO_CHANGES:
        return run.result(Outcome.NO_CHANGES, "no changes", version_now=prepared.ref)
    failed = pre.failed
    if failed is None:
        return None
    lock = _refusing_lock(failed) if failed.code == Code.LOCKED else LockRecord()
    dead_holder = failed.code == Code.LOCKED and holder_is_dead(lock)
    pending = facts.pending
    if dead_holder and pending:
        return run.result(
            Outcome.NEEDS_ATTENTION,
            f"unfinished deploy {pending[-1].get('deploy_id')} left by a dead run "
            f"({lock.get('holder')}): run `ddtree-deploy recover -H {run.host.name}`",
        )
    message = failed.error or "preflight failed"
    if dead_holder:
        message += " (that process is gone: --break-lock takes the lock over)"
    outcome = _REFUSALS.get(failed.code or "", Outcome.NEEDS_ATTENTION)
    # the refusal's data as the host sent it: {lock} when locked, {files: state} on drift
    return run.result(outcome, message, details=cast(HostDetails, failed.data or {}))


@dataclass
class Changes:
    """The requests that change one host, sent one at a time after its preflight passed;
    the first failure rolls the host back.

    The serving gate's stages are judged here, on the controller: a baseline that cannot
    be compared against, or a failed comparison, fails its request like a failed op.
    `answered`: a later request's answer that came with an earlier one (the reference,
    recorded beside the smoke suites), reported when that request's turn comes.
    """

    push: PushSteps
    gate: PushGate | None = None
    traffic: Traffic | None = None
    sent: list[Stage] = field(default_factory=list)
    suites: list[dict[str, Any]] = field(default_factory=list)
    answered: dict[Stage, AgentResponse] = field(default_factory=dict)

    @classmethod
    def of(cls, push: PushSteps) -> Changes:
        gate = PushGate(push.run, push.gate) if push.gating and push.gate is not None else None
        traffic = Traffic(push.run, push.deploy_id) if push.restarts else None
        return cls(push, gate, traffic)

    @property
    def restarted(self) -> bool:
        """Whether a restart was sent (a rollback then restarts the service again)."""
        return Stage.RESTART in self.sent

    def send(self, request: Request) -> HostResult | None:
        """Send one request; None when it passed (or was empty), else how the host ended."""
        push, run = self.push, self.push.run
        for stage in request.stages:
            if (why := push.skip_reason(stage)) is not None:
                run.recorder.skip(stage, why)
        steps = push.steps(request.stages)
        if not steps:
            return None
        if self.traffic is not None and any(stage == Stage.RESTART for stage, _ in steps):
            if (why := self.traffic.drain_stage()) is not None:  # nothing restarted: exit 1
                return self.rollback(why)
        self.sent += [stage for stage, _ in steps]
        try:
            answered = self.answered.pop(steps[0][0], None)
            response = run.call(steps, judged=_GATE_STAGES, answered=answered)
        except TransportError as exc:
            where = (
                "/".join(dict.fromkeys(s for s, _ in steps)) if request.is_joined else steps[0][0]
            )
            return roll_back_lost(push, exc, where, self.restarted, self.gate, self.traffic)
        gate = self.gate
        if gate is not None and response.ok and (why := _judge(gate, request, response)):
            return self.rollback(why, response)
        if gate is not None and not response.ok and _observed(gate, request):
            gate.observe(steps[0][0], f"measurement failed: {_error(response)}", [])
            return None  # --gate observe: a gate stage that failed stops nothing
        if not response.ok and request.on_fail == OnFail.IGNORE:
            run.recorder.info(steps[0][0], f"no reference recorded: {_error(response)}")
            return None  # verify says what it lacked
        self.suites += report_suites(run, steps, response)  # failed suites too: they say why
        if response.ok:
            self.keep_beside(steps, response)
            return None
        ran = [stage for (stage, _), _ in zip(steps, response.results, strict=False)]
        if request.on_fail_at(ran[-1] if ran else steps[0][0]) == OnFail.UNTOUCHED:
            run.release_lock()
            message = f"{_error(response)}; site-packages untouched"
            return run.result(Outcome.ROLLED_BACK, message, deploy_id=push.deploy_id)
        return roll_back_push(push, response, self.restarted, gate, traffic=self.traffic)

    def keep_beside(self, steps: list[Step], response: AgentResponse) -> None:
        """Keep the reference's answer that the smoke op carries, for the reference stage."""
        for (stage, _), result in zip(steps, response.results, strict=False):
            if stage == Stage.SMOKE and (answer := beside_answer(result)) is not None:
                self.answered[Stage.REFERENCE] = answer

    def rollback(self, reason: str, response: AgentResponse | None = None) -> HostResult:
        """Restore the backup because of `reason` (no op of this host failed)."""
        return roll_back_push(
            self.push, response, self.restarted, self.gate, reason=reason, traffic=self.traffic
        )

    def done(self) -> HostResult:
        """Every request passed: put drained servers back; the host's result."""
        push = self.push
        details: HostDetails = {"suites": self.suites}
        if self.gate is not None:
            details["gate"] = self.gate.details()
        outcome, message = Outcome.OK, "deployed"
        if self.traffic is not None and (why := self.traffic.readmit_stage()) is not None:
            outcome, message = Outcome.NEEDS_ATTENTION, f"deployed, but {why}"
        return push.run.result(
            outcome,
            message,
            deploy_id=push.deploy_id,
            version_now=push.prepared.ref,
            details=details,
        )


_GATE_STAGES = frozenset({Stage.BASELINE, Stage.CANARY})


def _judge(gate: PushGate, request: Request, response: AgentResponse) -> str | None:
    """The serving gate's verdict on a request that ran one of its stages, else None."""
    if Stage.BASELINE in request.stages:
        return gate.judge_baseline(response)
    if Stage.CANARY in request.stages:
        return gate.judge_canary(response)
    return None


def _observed(gate: PushGate, request: Request) -> bool:
    """Whether `request` is a serving-gate stage run in observe mode (never rolls back)."""
    return not gate.settings.enforced and bool(_GATE_STAGES & set(request.stages))


def report_suites(run: HostRun, steps: list[Step], response: AgentResponse) -> list[dict[str, Any]]:
    """Emit one info event per suite result of the smoke ops in `steps`; return them."""
    reported = []
    for (stage, _), result in zip(steps, response.results, strict=False):
        if result.op != OpName.SMOKE:
            continue
        for suite in suite_results(result):
            run.recorder.info(stage, describe_suite(suite), data=suite)
            reported.append(suite)
    return reported


def _refusing_lock(failed: OpResult) -> LockRecord:
    """The lock named by a `locked` refusal (its LockRefusal), or an empty record when the
    refusal carries none (or not as one)."""
    try:
        return failed.data_as(LockRefusal).lock or LockRecord()
    except WireError:
        return LockRecord()


def _holder(lock: LockRecord) -> str:
    return f"{lock.get('holder')} (run {lock.get('run_id')}, since {lock.get('started')})"


def _error(response: AgentResponse) -> str:
    failed = response.failed
    return (failed.error or failed.code or "failed") if failed else (response.error or "")
