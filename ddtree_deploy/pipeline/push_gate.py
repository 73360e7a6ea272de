"""The serving gate inside a push: judge the baseline the old server gave, compare the new
server with it after the restart, and confirm after a rollback that the old server is back
(docs/gate.md). The agent measures on the host; the verdicts are made here."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from ddtree_deploy.agent import AgentResponse
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_results import GateMeasurement
from ddtree_deploy.events import Stage
from ddtree_deploy.gate.compare import (
    GateCheck,
    accept_length,
    compare,
    describe_failures,
    describe_undecided,
    round_throughputs,
)
from ddtree_deploy.gate.settings import GateSettings
from ddtree_deploy.gate.verdict import ACTION_RANK
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.results import GateDetails, Outcome
from ddtree_deploy.stages.gate_plan import backup_file, gate_op

# What a rollback's replay must show again: the old server's speed, outputs and health.
ROLLBACK_CHECKS = frozenset({"tokens_per_s", "greedy_match", "error_rate"})
ROLLBACK_FILE = "gate-rollback.json"
# The checks a re-measure may clear: speed, the one noisy thing measured (recheck_speed).
SPEED_CHECKS = frozenset({"tokens_per_s", "p95_latency_ratio"})


def describe_measurement(m: GateMeasurement) -> str:
    """One line a person reads: requests, errors, tokens/s (median of rounds and range),
    accept length, the load's numbers when there was one."""
    replay = m.replay
    rates = round_throughputs(replay)
    speed = "no tokens"
    if rates:
        speed = f"{statistics.median(rates):.1f} tok/s (rounds {min(rates):.1f}-{max(rates):.1f})"
    accept = "no speculation" if replay.verify_ct == 0 else f"accept {accept_length(replay):.2f}"
    errors = f"{replay.errors} errors" if replay.errors else "no errors"
    line = f"{m.algorithm or 'plain'}: {replay.requests} requests, {speed}, {accept}, {errors}"
    if m.load is not None:
        load = m.load
        rate = load.tokens / load.wall_s if load.wall_s else 0.0
        line += (
            f"; load {load.requests} requests in {load.wall_s:.1f}s ({rate:.1f} tok/s), "
            f"{load.errors} errors, health {load.health_polls - load.health_failures}/"
            f"{load.health_polls} ok"
        )
    return line


def unusable(m: GateMeasurement) -> str | None:
    """Why a baseline cannot be compared against (errors, no tokens), or None."""
    replay = m.replay
    if replay.errors:
        return (
            f"{replay.errors} of {replay.requests} replay requests failed on the old server "
            f"(first: {replay.first_error})"
        )
    if not round_throughputs(replay) or replay.tokens <= 0:
        return "the old server generated no tokens"
    return None


@dataclass
class PushGate:
    """One host's serving gate during a push: its settings, and what it measured so far."""

    run: HostRun
    settings: GateSettings
    baseline: GateMeasurement | None = None
    checks: list[GateCheck] = field(default_factory=list)
    # observe mode: the checks that failed and would have rolled the push back
    would_fail: list[str] = field(default_factory=list)
    # the canary stopped the push for a person (a check's action needs_human): its rollback
    # ends NEEDS_ATTENTION (exit 3), not ROLLED_BACK (escalate)
    needs_human: bool = False

    def judge_baseline(self, response: AgentResponse) -> str | None:
        """End the baseline stage: None when the old server gave a usable baseline, else
        why not (the push then stops before installing anything)."""
        measured = response.result_as(OpName.GATE_MEASURE, GateMeasurement)
        if measured is None:
            return None  # the op failed: its stage already failed, the push rolls back
        problem = unusable(measured)
        if problem is not None and not self.settings.enforced:
            self.observe(Stage.BASELINE, f"no usable baseline: {problem}", [])
            self.run.recorder.ok(
                Stage.BASELINE, describe_measurement(measured), data=_data(measured)
            )
            return None
        if problem is not None:
            reason = f"no usable baseline: {problem} (--gate off pushes without one)"
            self.run.recorder.fail(Stage.BASELINE, reason, data=_data(measured))
            return reason
        self.baseline = measured
        self.run.recorder.ok(Stage.BASELINE, describe_measurement(measured), data=_data(measured))
        return None

    def judge_canary(self, response: AgentResponse) -> str | None:
        """End the canary stage: every check as an info event, then ok or fail; returns the
        checks that stop the push (`gate.<name>: why; ...`: failed, or needing a human) or
        None."""
        measured = response.result_as(OpName.GATE_MEASURE, GateMeasurement)
        if measured is None:
            return None
        if self.baseline is None:  # observe mode went on without one: nothing to compare
            line = f"{describe_measurement(measured)} (no baseline to compare with)"
            self.run.recorder.ok(Stage.CANARY, line, data=_data(measured))
            return None
        checks = compare(self.baseline, measured, self.settings.thresholds)
        checks = recheck_speed(self.run, self.settings, self.baseline, checks, Stage.CANARY)
        self.checks = report_checks(self.run, Stage.CANARY, checks)
        failed = _stopping(self.checks)
        if failed and not self.settings.enforced:
            names = [c.name for c in self.checks if not c.passed]
            self.observe(Stage.CANARY, f"gate {failed}", names)
            self.run.recorder.ok(Stage.CANARY, describe_measurement(measured), data=_data(measured))
            return None
        if failed:
            self.needs_human = not describe_failures(self.checks)
            self.run.recorder.fail(Stage.CANARY, f"gate {failed}", data=_data(measured))
            return f"gate {failed}"
        self.run.recorder.ok(Stage.CANARY, describe_measurement(measured), data=_data(measured))
        return None

    def confirm_rollback(self, deploy_id: str) -> str | None:
        """After a rollback that restarted the old code: replay again and compare with the
        baseline. Returns why the old server is not back (exit 3), or None when it is."""
        if self.baseline is None:
            return None
        op = gate_op(
            self.run.host,
            self.settings,
            "rollback",
            load=False,
            save_as=backup_file(deploy_id, ROLLBACK_FILE),
        )
        response = self.run.ask([(Stage.ROLLBACK, op)])
        if not isinstance(response, AgentResponse):
            return f"the rollback's replay could not run: {response.message}"
        measured = response.result_as(OpName.GATE_MEASURE, GateMeasurement)
        if measured is None:
            failed = response.failed
            return f"the rollback's replay failed: {failed.error if failed else response.error}"
        checks = compare(self.baseline, measured, self.settings.thresholds, only=ROLLBACK_CHECKS)
        checks = recheck_speed(self.run, self.settings, self.baseline, checks, Stage.ROLLBACK)
        self.checks += report_checks(self.run, Stage.ROLLBACK, checks, prefix="rollback.")
        broken = describe_failures(checks) or describe_undecided(checks)
        return f"the old server is not back at its baseline: {broken}" if broken else None

    def escalate(self, outcome: Outcome) -> Outcome:
        """The push's outcome after its rollback: NEEDS_ATTENTION (exit 3) instead of
        ROLLED_BACK when the canary's verdict was one a person must make."""
        if self.needs_human and outcome == Outcome.ROLLED_BACK:
            return Outcome.NEEDS_ATTENTION
        return outcome

    def details(self) -> GateDetails:
        """What a host result carries: the baseline's line and every check (JUnit cases)."""
        baseline = describe_measurement(self.baseline) if self.baseline else None
        details: GateDetails = {
            "baseline": baseline,
            "checks": [c.to_dict() for c in self.checks],
        }
        if not self.settings.enforced:
            details["observe"] = {"would_fail": list(self.would_fail), "rolled_back": False}
        return details

    def observe(self, stage: Stage, verdict: str, names: list[str]) -> None:
        """Observe mode: what would have stopped the push (`verdict`; the failed checks'
        `names`, or [] when the stage itself failed: an unusable baseline, a measurement
        that could not run, named by `stage`) is said as an info event and a warning on the
        host's result; nothing is rolled back because of it."""
        names = names or [str(stage)]
        self.would_fail += names
        said = f"observe mode: {verdict}; not rolled back"
        data = {"observe": {"would_fail": names, "rolled_back": False}}
        self.run.recorder.info(stage, said, data=data)
        self.run.warnings.append(said)


def recheck_speed(
    run: HostRun,
    settings: GateSettings,
    baseline: GateMeasurement,
    checks: list[GateCheck],
    stage: Stage,
) -> list[GateCheck]:
    """When only the speed checks failed, replay again (`retries` times at most, replay
    only) and keep each speed check that passes on a later replay; returns the checks.

    Speed is the one noisy thing the gate measures: what else runs on the machine between
    the baseline and now moves it more than the spread within either replay (docs/gate.md).
    Like Argo Rollouts' failureLimit, a speed check fails only when every replay fails it; a
    real regression does (the detail lists every attempt). Correctness checks (greedy
    output, errors, accept length, health, metrics) are judged once: they are not noise.
    """
    failed = {c.name for c in checks if not c.passed}  # failed, or needs a human
    if not failed or not failed <= SPEED_CHECKS:
        return checks
    tries: dict[str, list[str]] = {name: [] for name in failed}
    by_name = {c.name: c for c in checks}
    for attempt in range(2, settings.retries + 2):
        op = gate_op(run.host, settings, f"retry-{attempt}", load=False)
        response = run.ask_quietly([(stage, op)])
        try:
            measured = (
                response.result_as(OpName.GATE_MEASURE, GateMeasurement) if response else None
            )
        except WireError:  # not a measurement: the checks stand as they are
            measured = None
        if measured is None:
            break
        again = {c.name: c for c in compare(baseline, measured, settings.thresholds)}
        for name in list(tries):
            first = again[name].detail.splitlines()[0] if again[name].detail else ""
            tries[name].append(f"replay {attempt}: {first}")
            if again[name].passed:
                by_name[name] = replace(again[name], detail=_with_tries(again[name], tries[name]))
                del tries[name]
            elif ACTION_RANK[again[name].action] > ACTION_RANK[by_name[name].action]:
                by_name[name] = again[name]  # inconclusive beats failed: the best one stands
        if not tries:
            break
    for name, lines in tries.items():
        by_name[name] = replace(by_name[name], detail=_with_tries(by_name[name], lines))
    return [by_name[c.name] for c in checks]


def _with_tries(check: GateCheck, lines: list[str]) -> str:
    """The check's detail with every re-measure listed after its first line."""
    first, *rest = check.detail.splitlines() or [""]
    return "\n".join([first, *lines, *rest])


def report_checks(
    run: HostRun, stage: Stage, checks: list[GateCheck], prefix: str = ""
) -> list[GateCheck]:
    """One info event per check (data: {"gate": check}); returns the checks, named with
    `prefix` (the rollback's confirmation: `rollback.tokens_per_s`)."""
    named = [replace(c, name=prefix + c.name) for c in checks]
    for check in named:
        shown = {"PASS": "ok", "FAIL": "FAILED"}
        verdict = shown.get(check.verdict) or f"{check.verdict} ({check.action})"
        first = check.detail.splitlines()[0] if check.detail else ""
        run.recorder.info(
            stage, f"gate.{check.name} {verdict}: {first}", data={"gate": check.to_dict()}
        )
    return named


def _stopping(checks: list[GateCheck]) -> str:
    """What in `checks` stops a push: "failed: ..." (and the undecided after them), or
    "needs a human: ..." when none failed outright; "" when nothing stops it."""
    failed, undecided = describe_failures(checks), describe_undecided(checks)
    if failed:
        return f"failed: {failed}" + (f"; needs a human: {undecided}" if undecided else "")
    return f"needs a human: {undecided}" if undecided else ""


def _data(m: GateMeasurement) -> dict[str, Any]:
    """A measurement as event data, without the bulky parts (outputs, metrics text)."""
    data = m.to_dict()
    data["replay"] = {k: v for k, v in data["replay"].items() if k != "outputs"}
    for key in ("metrics_before", "metrics_after"):
        data[key] = None if data.get(key) is None else f"{len(data[key])} chars"
    return {"measurement": data}
