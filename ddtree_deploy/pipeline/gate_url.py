"""`gate --url URL`: the serving gate measured from the controller against any reachable
server (a canary pod behind `kubectl port-forward`, a Slurm job's node), compared with a
baseline file by the same rules as a push's gate (gate/compare.py).

No host and no agent: the agent's measuring code (agent/host/ops_gate.py, stdlib only) runs
in this process against the URL. The baseline must be given (`--baseline FILE`, e.g. what
`gate --record DIR` wrote, or a push's backups/<deploy>/gate-after.json); a failed speed
check is re-measured like the push's gate (replay only, `retries` times) before it counts.
"""

from __future__ import annotations

import json
import tempfile
import types
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ddtree_deploy.agent.host.ops_gate import op_gate_measure
from ddtree_deploy.agent.host.wire import OpFailed
from ddtree_deploy.agent.host.wire_results import GateMeasurement
from ddtree_deploy.gate.compare import GateCheck, compare, describe_failures, describe_undecided
from ddtree_deploy.gate.settings import GateConfig, GateMode, GateSettings, resolve
from ddtree_deploy.gate.verdict import ACTION_RANK
from ddtree_deploy.pipeline.gate import read_baseline
from ddtree_deploy.pipeline.push_gate import SPEED_CHECKS, describe_measurement, unusable
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages.gate_plan import gate_args


@dataclass(frozen=True)
class UrlGateResult:
    """The verdict: ok (all checks passed), refused (bad input: exit 2), needs_human (no
    check failed, but one's verdict is a person's to make: exit 3), the message and the
    checks (JSON-ready)."""

    ok: bool
    refused: bool
    message: str
    details: dict[str, Any]
    needs_human: bool = False


def plan_url_gate(
    prepared: PreparedPatchset | None, baseline: GateMeasurement, mode: GateMode | None
) -> GateSettings:
    """Return the settings: the patchset's [gate] table over the defaults, its prompts, else
    the baseline's own (as many and as long)."""
    config = prepared.gate.over(GateConfig()) if prepared and prepared.gate else GateConfig()
    prompts = prepared.gate_prompts if prepared else ()
    settings = resolve(config, prompts or tuple(baseline.prompts), mode)
    if not prompts and baseline.max_new_tokens:
        settings = replace(settings, max_new_tokens=baseline.max_new_tokens)
    return settings


def measure_url(
    url: str, settings: GateSettings, phase: str, load: bool, api_key_env: str | None = None
) -> GateMeasurement:
    """Measure the server at `url` (raises OpFailed as the agent's op does)."""
    health_url = url.rstrip("/") + "/health"
    args = gate_args(
        url, settings, phase, load=load, health_url=health_url, api_key_env=api_key_env
    )
    with tempfile.TemporaryDirectory() as state_dir:  # nothing is saved: no save_as/read_as
        ctx = types.SimpleNamespace(state_dir=state_dir)
        # the agent's stdlib code is untyped (it runs on any host python); it returns this
        measured: GateMeasurement = op_gate_measure(ctx, args)  # type: ignore[no-untyped-call]
    return measured


def _recheck(
    url: str,
    settings: GateSettings,
    baseline: GateMeasurement,
    checks: list[GateCheck],
    api_key_env: str | None,
) -> list[GateCheck]:
    """Re-measure (replay only) while only speed checks fail (or need a human); keep each
    attempt that does better (passes, or is inconclusive where it failed)."""
    for attempt in range(2, settings.retries + 2):
        failed = {c.name for c in checks if not c.passed}
        if not failed or not failed <= SPEED_CHECKS:
            break
        again = {
            c.name: c
            for c in compare(
                baseline,
                measure_url(url, settings, f"retry-{attempt}", False, api_key_env),
                settings.thresholds,
            )
        }
        checks = [
            again[c.name]
            if c.name in failed and ACTION_RANK[again[c.name].action] > ACTION_RANK[c.action]
            else c
            for c in checks
        ]
    return checks


def gate_url(
    url: str,
    prepared: PreparedPatchset | None,
    mode: GateMode | None,
    baseline_path: Path | None,
    record: Path | None,
    api_key_env: str | None = None,
) -> UrlGateResult:
    """Measure `url` and compare with the baseline at `baseline_path`; never raises for an
    expected outcome (bad baseline: refused; unreachable server or failed check: not ok).

    Without a baseline it only measures and records (the stable server's baseline, taken
    before a canary starts); the patchset's prompts are then needed.
    """
    if baseline_path is None:
        return _record_only(url, prepared, mode, record, api_key_env)
    try:
        baseline = read_baseline(baseline_path, "baseline")
    except ValueError as exc:
        return UrlGateResult(False, True, str(exc), {})
    problem = unusable(baseline)
    if problem is not None:
        return UrlGateResult(False, True, f"{baseline_path}: baseline unusable: {problem}", {})
    settings = plan_url_gate(prepared, baseline, mode)
    try:
        measured = measure_url(url, settings, "check", True, api_key_env)
    except OpFailed as exc:
        return UrlGateResult(False, exc.code == "api_key_unreadable", f"{url}: {exc}", {})
    if record is not None:
        _write(record, measured)
    first = compare(baseline, measured, settings.thresholds)
    checks = _recheck(url, settings, baseline, first, api_key_env)
    details = {
        "url": url,
        "measured": describe_measurement(measured),
        "baseline": describe_measurement(baseline),
        "checks": [c.to_dict() for c in checks],
    }
    broken = describe_failures(checks)
    if broken:
        return UrlGateResult(
            False, False, f"gate failed against {baseline_path}: {broken}", details
        )
    undecided = describe_undecided(checks)
    if undecided:
        message = f"gate needs a human against {baseline_path}: {undecided}"
        return UrlGateResult(False, False, message, details, needs_human=True)
    return UrlGateResult(True, False, f"{url} is as good as {baseline_path}", details)


def _write(record: Path, measured: GateMeasurement) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    plain = {k: v for k, v in measured.to_dict().items() if k != "stored"}
    record.write_text(json.dumps(plain, indent=1) + "\n", encoding="utf-8")


def _record_only(
    url: str,
    prepared: PreparedPatchset | None,
    mode: GateMode | None,
    record: Path | None,
    api_key_env: str | None,
) -> UrlGateResult:
    """Measure `url` with the patchset's prompts and write the measurement to `record`."""
    prompts = prepared.gate_prompts if prepared else ()
    if record is None or not prompts:
        message = "gate --url: give --baseline FILE, or --record FILE with -p NAME@VERSION"
        return UrlGateResult(False, True, message + " (whose prompts are replayed)", {})
    config = prepared.gate.over(GateConfig()) if prepared and prepared.gate else GateConfig()
    settings = resolve(config, prompts, mode)
    try:
        measured = measure_url(url, settings, "baseline", True, api_key_env)
    except OpFailed as exc:
        return UrlGateResult(False, exc.code == "api_key_unreadable", f"{url}: {exc}", {})
    problem = unusable(measured)
    if problem is not None:
        return UrlGateResult(False, False, f"{url}: not usable as a baseline: {problem}", {})
    _write(record, measured)
    details = {"url": url, "measured": describe_measurement(measured), "recorded": str(record)}
    return UrlGateResult(True, False, f"{url}: measured, recorded in {record}", details)
