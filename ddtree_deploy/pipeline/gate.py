"""`gate` for one host: is the running server still as good as its recorded baseline?

Read-only on the server's code: the agent replays the gate's prompts (and with `full`, the
load and bake) and the controller compares with a baseline: by default the measurement the
host's last committed push saved after its restart (backups/<deploy>/gate-after.json),
else a file given with --baseline. Without prompts of its own (no -p, none in the
inventory) it replays the baseline's, as long and as many.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import Code, JournalState, OpName
from ddtree_deploy.agent.host.wire_results import GateMeasurement
from ddtree_deploy.events import Stage
from ddtree_deploy.gate.compare import compare, describe_failures, describe_undecided
from ddtree_deploy.gate.settings import GateMode
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.push_gate import (
    describe_measurement,
    recheck_speed,
    report_checks,
    unusable,
)
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages.gate_plan import AFTER_FILE, backup_file, gate_op, plan_gate


@dataclass(frozen=True)
class GateOptions:
    """The `gate` command's options: --gate, --baseline (a file or a dir of <host>.json),
    --record (a dir: this run's measurement written to <dir>/<host>.json)."""

    mode: GateMode | None = None
    baseline: Path | None = None
    record: Path | None = None


def read_baseline(path: Path, host: str) -> GateMeasurement:
    """The baseline in `path` (a measurement JSON file, or a dir holding <host>.json);
    raises ValueError naming the file and the problem."""
    file = path / f"{host}.json" if path.is_dir() else path
    try:
        return GateMeasurement.from_dict(json.loads(file.read_text(encoding="utf-8")), str(file))
    except (OSError, ValueError, WireError) as exc:
        raise ValueError(f"{file}: not a gate measurement: {exc}") from None


def gate_host(run: HostRun, prepared: PreparedPatchset | None, opts: GateOptions) -> HostResult:
    """Measure the host's server now and compare with its baseline: OK, FAILED (a check
    failed, exit 1), REFUSED (no baseline, no prompts: exit 2), NEEDS_ATTENTION (a check
    whose verdict a person must make, e.g. inconclusive: exit 3)."""
    host = run.host
    try:
        baseline = read_baseline(opts.baseline, host.name) if opts.baseline else None
        # without prompts of its own, the gate replays what its baseline replayed
        need = baseline is not None and not baseline.prompts
        settings = plan_gate(host, prepared, opts.mode, need) or plan_gate(
            host, prepared, "full", need
        )
    except ValueError as exc:
        return run.result(Outcome.REFUSED, str(exc))
    assert settings is not None  # plan_gate with a mode other than off returns settings
    if not settings.prompts and baseline is not None:
        settings = replace(
            settings,
            prompts=tuple(baseline.prompts),
            max_new_tokens=baseline.max_new_tokens or settings.max_new_tokens,
        )
    read_as, origin = None, f"--baseline {opts.baseline}"
    if baseline is None:
        found = read_facts(run, prepared, Stage.CHECK)
        if isinstance(found, HostResult):
            return found
        committed = [d for d in found.facts.deploys if d.get("state") == JournalState.COMMITTED]
        if not committed:
            return run.result(Outcome.REFUSED, "no committed deploy: no recorded baseline")
        deploy_id = str(committed[-1].get("deploy_id"))
        read_as, origin = backup_file(deploy_id, AFTER_FILE), f"deploy {deploy_id}"
    op = gate_op(host, settings, "check", load=True, read_as=read_as)
    response = run.ask([(Stage.CANARY, op)], judged=frozenset({Stage.CANARY}))
    if isinstance(response, HostResult):
        return response
    measured = response.result_as(OpName.GATE_MEASURE, GateMeasurement)
    if measured is None:
        failed = response.failed
        message = f"gate_measure failed: {failed.error if failed else response.error}"
        if failed is not None and failed.code == Code.API_KEY_UNREADABLE:
            return run.result(Outcome.REFUSED, message)  # bad input: nothing was measured
        return run.result(Outcome.NEEDS_ATTENTION, message)
    if baseline is None:
        if measured.stored is None:
            message = f"{origin} saved no gate measurement ({read_as}): pushed without a gate?"
            run.recorder.fail(Stage.CANARY, message)
            return run.result(Outcome.REFUSED, message)
        baseline = GateMeasurement.from_dict(measured.stored, read_as)
    if opts.record is not None:
        opts.record.mkdir(parents=True, exist_ok=True)
        plain = {k: v for k, v in measured.to_dict().items() if k != "stored"}
        (opts.record / f"{host.name}.json").write_text(json.dumps(plain, indent=1) + "\n")
    problem = unusable(baseline)
    if problem is not None:
        run.recorder.fail(Stage.CANARY, f"baseline unusable: {problem}")
        return run.result(Outcome.REFUSED, f"{origin}: baseline unusable: {problem}")
    checks = compare(baseline, measured, settings.thresholds)
    checks = recheck_speed(run, settings, baseline, checks, Stage.CANARY)
    checks = report_checks(run, Stage.CANARY, checks)
    broken = describe_failures(checks)
    details: HostDetails = {
        "gate": {
            "baseline": describe_measurement(baseline),
            "checks": [c.to_dict() for c in checks],
        }
    }
    if broken:
        run.recorder.fail(Stage.CANARY, f"gate failed: {broken}")
        return run.result(
            Outcome.FAILED, f"gate failed against {origin}: {broken}", details=details
        )
    undecided = describe_undecided(checks)
    if undecided:
        run.recorder.fail(Stage.CANARY, f"gate needs a human: {undecided}")
        message = f"gate needs a human against {origin}: {undecided}"
        return run.result(Outcome.NEEDS_ATTENTION, message, details=details)
    run.recorder.ok(Stage.CANARY, describe_measurement(measured))
    return run.result(Outcome.OK, f"as good as its baseline ({origin})", details=details)
