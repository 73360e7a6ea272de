"""The gate's checks: the new server's measurement against the baseline measured on the
old server just before, on the same host (Kayenta-style). Pure: both measurements
(agent gate_measure results) and the thresholds come in as arguments.

Each check has one of four verdicts (verdict.py): PASS, FAIL, INCONCLUSIVE (the change lies
between the threshold and the noise band: the run cannot tell it from noise) or NO_DATA
(nothing to compare); the thresholds' on_inconclusive / on_no_data say what the last two do
(the check's `action`: pass, fail or needs_human). One GateCheck per rule, in this order:

- tokens_per_s (noise-aware): each replay round's throughput is tokens / wall_s (rounds
  with wall_s <= 0 are left out); B and N are the medians of the baseline's and the new
  server's rounds. The noise band is the wider of the two measurements' (max - min) /
  median over their rounds (0 with one round), capped at 0.5: a difference smaller than
  the spread between identical rounds of either side cannot be told from noise (measured:
  docs/gate.md), and a 2x slowdown is caught through any band. With the regression
  1 - N/B: PASS when <= max_tokens_per_s_regression, FAIL when beyond both it and the
  band, else INCONCLUSIVE. NO_DATA when the baseline has no positive median ("baseline
  measured no tokens") or the new server no rounds.
- accept_length_ratio: accept length = replay.tokens / replay.verify_ct, or 1.0 when
  verify_ct is 0 (plain decoding: one token per forward, shown as "no speculation"); new /
  baseline must be >= min_accept_length_ratio. NO_DATA when the baseline's is 0.
- greedy_match: the replays' outputs per prompt under exact | prefix:N | ratio:x (see
  greedy.py for what each means); the detail names the first differing prompt and token.
  NO_DATA when neither side has outputs.
- error_rate: the new server's errors / requests over its replay plus its load (if any)
  must be <= max_error_rate; the detail quotes the first error (the replay's, else the
  load's). NO_DATA when it made no requests.
- p95_latency_ratio: the nearest-rank p95 of new.replay.latencies_s over the baseline's:
  PASS when <= max_p95_latency_ratio, FAIL beyond it x (1 + band) (the band being
  tokens_per_s's), else INCONCLUSIVE. NO_DATA when either side has no latencies (or the
  baseline's p95 is 0).
- health: only when the new measurement has a load: its health polls must not have
  failed, and the load must not have stopped early. NO_DATA when nothing was polled.
- "metrics: <rule>": one per rule of thresholds.metrics (metrics.py), over the new
  server's /metrics text before and after its run; metrics_error is quoted when the text is
  missing (NO_DATA); a metric missing from the text, or a rule that does not parse, fails.

Before them, only when the two replayed different prompts or max_new_tokens (both
recorded): a failed `same_replay` check (their numbers cannot be compared).

Ratios and the regression are compared with a 1e-9 slack, so a value exactly at its limit
passes despite float rounding.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any

from ddtree_deploy.agent.host.wire_results import GateMeasurement, LoadStats, ReplayStats
from ddtree_deploy.gate.greedy import compare_outputs
from ddtree_deploy.gate.metrics import evaluate, format_number, measure, parse_rule
from ddtree_deploy.gate.settings import Thresholds
from ddtree_deploy.gate.verdict import SLACK, Action, Verdict, action_of, judge_drop, judge_ratio

NOISE_BAND_CAP = 0.5


@dataclass(frozen=True)
class GateCheck:
    """One rule's verdict, as the summary table and the JSON report show it.

    name: tokens_per_s | accept_length_ratio | greedy_match | error_rate |
    p95_latency_ratio | health | "metrics: <rule>"; verdict: PASS | FAIL | INCONCLUSIVE |
    NO_DATA; baseline/new: the values as shown ("" when not applicable); limit: what was
    required; detail: its first line is a one-line verdict naming the values, further lines
    add context; action: what the verdict does under the thresholds (compare() sets it;
    built alone, anything but PASS fails).
    """

    name: str
    verdict: Verdict
    baseline: str
    new: str
    limit: str
    detail: str
    action: Action = Action.FAIL

    @property
    def passed(self) -> bool:
        """Whether the check lets the run go on (its verdict passes, or is let pass)."""
        return self.action == Action.PASS

    @property
    def needs_human(self) -> bool:
        """Whether the check stops the run for a person (exit 3)."""
        return self.action == Action.NEEDS_HUMAN

    def to_dict(self) -> dict[str, Any]:
        """Return the check as a JSON-ready dict (`passed`: what report/ reads)."""
        return {
            "name": self.name,
            "verdict": str(self.verdict),
            "action": str(self.action),
            "passed": self.passed,
            "baseline": self.baseline,
            "new": self.new,
            "limit": self.limit,
            "detail": self.detail,
        }


def round_throughputs(replay: ReplayStats) -> list[float]:
    """Return each replay round's throughput in tokens/s (rounds with wall_s <= 0 left out)."""
    return [r["tokens"] / r["wall_s"] for r in replay.rounds if r["wall_s"] > 0]


def accept_length(replay: ReplayStats) -> float:
    """Return the replay's tokens per verify step; 1.0 when it did not speculate."""
    return replay.tokens / replay.verify_ct if replay.verify_ct else 1.0


def p95(values: list[float]) -> float | None:
    """Return the nearest-rank 95th percentile of `values` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def noise_band(throughputs: list[float]) -> float:
    """Return the spread (max - min) / median of one measurement's rounds, capped at 0.5
    (0 with fewer than two rounds or a median that is not positive)."""
    if len(throughputs) < 2 or statistics.median(throughputs) <= 0:
        return 0.0
    spread = (max(throughputs) - min(throughputs)) / statistics.median(throughputs)
    return min(spread, NOISE_BAND_CAP)


def compare(
    baseline: GateMeasurement,
    new: GateMeasurement,
    thresholds: Thresholds,
    only: frozenset[str] | None = None,
) -> list[GateCheck]:
    """Return the checks of `new` against `baseline` (see the module docstring), in order.

    only: the check names to run (e.g. {"tokens_per_s", "greedy_match", "error_rate"} for a
    rollback's confirmation); None runs all. Raises ValueError on a greedy_match mode that
    settings would have refused.
    """
    # what this pair of measurements can resolve: the wider spread of either side's rounds
    band = max(
        noise_band(round_throughputs(baseline.replay)), noise_band(round_throughputs(new.replay))
    )
    checks = [
        _tokens_per_s(baseline, new, thresholds, band),
        _accept_length(baseline, new, thresholds),
        _greedy(baseline, new, thresholds),
        _error_rate(baseline, new, thresholds),
        _p95_latency(baseline, new, thresholds, band),
    ]
    if new.load is not None:
        checks.append(_health(new.load))
    checks.extend(_metrics(baseline, new, rule) for rule in thresholds.metrics)
    checks = [c for c in checks if only is None or c.name in only]
    mismatch = _same_replay(baseline, new)
    checks = checks if mismatch is None else [mismatch, *checks]
    acting = thresholds.on_inconclusive, thresholds.on_no_data
    return [dataclasses.replace(c, action=action_of(c.verdict, *acting)) for c in checks]


def _same_replay(baseline: GateMeasurement, new: GateMeasurement) -> GateCheck | None:
    """A failed `same_replay` check when the two replayed different prompts or lengths
    (their numbers cannot be compared), else None. Measurements that do not record what
    they replayed (prompts []) are taken as comparable."""
    if not baseline.prompts or not new.prompts:
        return None
    if baseline.prompts == new.prompts and baseline.max_new_tokens == new.max_new_tokens:
        return None
    shown_base = f"{len(baseline.prompts)} prompts x {baseline.max_new_tokens} tokens"
    shown_new = f"{len(new.prompts)} prompts x {new.max_new_tokens} tokens"
    detail = (
        f"the baseline replayed other prompts or lengths ({shown_base}) than now "
        f"({shown_new}): the numbers cannot be compared"
    )
    return GateCheck("same_replay", Verdict.FAIL, shown_base, shown_new, "the same replay", detail)


def describe_failures(checks: list[GateCheck]) -> str:
    """Return the checks that fail the run as "gate.NAME: <first line>; ..." ("" when none)."""
    return _describe([c for c in checks if c.action == Action.FAIL])


def describe_undecided(checks: list[GateCheck]) -> str:
    """Return the checks that need a human (their action needs_human) as "gate.NAME:
    <first line>; ..." ("" when none)."""
    return _describe([c for c in checks if c.needs_human])


def _describe(checks: list[GateCheck]) -> str:
    return "; ".join(
        f"gate.{c.name}: {c.detail.splitlines()[0] if c.detail else c.verdict}" for c in checks
    )


def _tokens_per_s(
    baseline: GateMeasurement, new: GateMeasurement, thresholds: Thresholds, band: float
) -> GateCheck:
    """The noise-aware throughput check."""
    base_rounds = round_throughputs(baseline.replay)
    new_rounds = round_throughputs(new.replay)
    base = statistics.median(base_rounds) if base_rounds else 0.0
    now = statistics.median(new_rounds) if new_rounds else 0.0
    shown_new = f"{now:.1f} tok/s" if new_rounds else "no rounds"
    threshold = thresholds.max_tokens_per_s_regression
    rounds = f"rounds (tok/s): baseline {_listed(base_rounds)}; new {_listed(new_rounds)}"
    if base <= 0 or not new_rounds:
        why = "baseline measured no tokens" if base <= 0 else "the new server measured no rounds"
        shown_base = f"{base:.1f} tok/s"
        return GateCheck("tokens_per_s", Verdict.NO_DATA, shown_base, shown_new, "", why)
    regression = 1 - now / base
    verdict = judge_drop(regression, threshold, band)
    limit = f">= {base * (1 - threshold):.1f} tok/s (-{threshold:.0%}; noise band {band:.1%})"
    head = f"tokens/s {base:.1f} -> {now:.1f} ({-regression:+.1%})"
    if verdict == Verdict.INCONCLUSIVE:
        line = (
            f"{head}: inconclusive: noise band {band:.1%} > threshold {threshold:.1%} "
            f"(passes down to -{threshold:.1%}, fails past -{band:.1%})"
        )
    elif verdict == Verdict.FAIL and band > threshold:
        line = f"{head}, past the noise band -{band:.1%} (threshold {threshold:.1%})"
    else:
        line = f"{head}, allowed -{threshold:.1%} (threshold; noise band {band:.1%})"
    return GateCheck(
        "tokens_per_s", verdict, f"{base:.1f} tok/s", shown_new, limit, f"{line}\n{rounds}"
    )


def _accept_length(
    baseline: GateMeasurement, new: GateMeasurement, thresholds: Thresholds
) -> GateCheck:
    """New accept length over the baseline's."""
    base, now = accept_length(baseline.replay), accept_length(new.replay)
    shown_base, shown_new = _shown_accept(baseline.replay), _shown_accept(new.replay)
    minimum = thresholds.min_accept_length_ratio
    if base <= 0:
        detail = f"no data: the baseline's accept length is {base:g} (no ratio)"
        return GateCheck("accept_length_ratio", Verdict.NO_DATA, shown_base, shown_new, "", detail)
    ratio = now / base
    limit = f">= {minimum:g}x baseline (>= {base * minimum:.2f})"
    detail = f"accept length {base:.2f} -> {now:.2f} (ratio {ratio:.3f}, >= {minimum:g} required)"
    verdict = _holds(ratio >= minimum - SLACK)
    return GateCheck("accept_length_ratio", verdict, shown_base, shown_new, limit, detail)


def _shown_accept(replay: ReplayStats) -> str:
    """An accept length as shown: "3.42", or "1.00 (no speculation)"."""
    value = f"{accept_length(replay):.2f}"
    return value if replay.verify_ct else f"{value} (no speculation)"


def _greedy(baseline: GateMeasurement, new: GateMeasurement, thresholds: Thresholds) -> GateCheck:
    """The replays' greedy outputs, prompt by prompt."""
    mode = thresholds.greedy_match
    verdict = compare_outputs(baseline.replay.outputs, new.replay.outputs, mode)
    summary = f"{verdict.matched}/{verdict.total} prompts match ({mode})"
    detail = f"{summary}; {verdict.first_difference}" if verdict.first_difference else summary
    shown_base = f"{len(baseline.replay.outputs)} prompts"
    shown_new = f"{verdict.matched}/{verdict.total} match"
    held = Verdict.NO_DATA if verdict.total == 0 else _holds(verdict.passed)
    if held == Verdict.NO_DATA:
        detail = "no data: neither replay has outputs to compare"
    return GateCheck("greedy_match", held, shown_base, shown_new, verdict.limit, detail)


def _error_rate(
    baseline: GateMeasurement, new: GateMeasurement, thresholds: Thresholds
) -> GateCheck:
    """The new server's errors over its requests, replay and load together."""
    errors, requests, first = _errors(new)
    base_errors, base_requests, _ = _errors(baseline)
    rate = errors / requests if requests else 0.0
    maximum = thresholds.max_error_rate
    detail = f"{errors} errors in {requests} requests ({rate:.1%}, <= {maximum:.1%} allowed)"
    if first:
        detail += f"; first: {first}"
    shown_base = _shown_rate(base_errors, base_requests)
    verdict = _holds(rate <= maximum + SLACK) if requests else Verdict.NO_DATA
    if not requests:
        detail = "no data: the new server was sent no requests"
    shown_new = _shown_rate(errors, requests)
    return GateCheck("error_rate", verdict, shown_base, shown_new, f"<= {maximum:.1%}", detail)


def _errors(measurement: GateMeasurement) -> tuple[int, int, str | None]:
    """Return (errors, requests, first error) over a measurement's replay and load."""
    replay, load = measurement.replay, measurement.load
    if load is None:
        return replay.errors, replay.requests, replay.first_error
    first = replay.first_error or load.first_error
    return replay.errors + load.errors, replay.requests + load.requests, first


def _shown_rate(errors: int, requests: int) -> str:
    """An error rate as shown: "2/40 (5.0%)"."""
    rate = errors / requests if requests else 0.0
    return f"{errors}/{requests} ({rate:.1%})"


def _p95_latency(
    baseline: GateMeasurement, new: GateMeasurement, thresholds: Thresholds, band: float
) -> GateCheck:
    """The replay's p95 latency against the baseline's, widened by the noise band."""
    base, now = p95(baseline.replay.latencies_s), p95(new.replay.latencies_s)
    shown_base = f"{base:.3f} s" if base is not None else ""
    shown_new = f"{now:.3f} s" if now is not None else ""
    maximum = thresholds.max_p95_latency_ratio
    wide = maximum * (1 + band)
    limit = f"<= x{maximum:.2f} (inconclusive to x{wide:.2f}: noise band {band:.1%})"
    if base is None or now is None or base <= 0:
        side = "the baseline" if base is None or base <= 0 else "the new server"
        detail = f"no data: {side} measured no replay latencies"
        return GateCheck("p95_latency_ratio", Verdict.NO_DATA, shown_base, shown_new, limit, detail)
    ratio = now / base
    verdict = judge_ratio(ratio, maximum, band)
    detail = f"p95 latency {base:.3f} s -> {now:.3f} s (x{ratio:.2f}, <= x{maximum:.2f} allowed)"
    if verdict == Verdict.INCONCLUSIVE:
        detail += f": inconclusive: within the noise band {band:.1%} (fails past x{wide:.2f})"
    elif verdict == Verdict.FAIL and band > 0:
        detail += f", past x{wide:.2f} with the noise band {band:.1%}"
    return GateCheck("p95_latency_ratio", verdict, shown_base, shown_new, limit, detail)


def _health(load: LoadStats) -> GateCheck:
    """The health polls made during the new server's load, and whether it ran to plan."""
    shown = f"{load.health_failures}/{load.health_polls} failed"
    detail = f"{load.health_polls} health polls, {load.health_failures} failed"
    if load.first_health_failure:
        detail += f"; first: {load.first_health_failure}"
    if load.stopped_early:
        detail = f"load stopped early: {load.stopped_early}; {detail}"
    verdict = _holds(load.health_failures == 0 and not load.stopped_early)
    if verdict == Verdict.PASS and load.health_polls == 0:
        verdict, detail = Verdict.NO_DATA, "no data: no health poll was made during the load"
    return GateCheck("health", verdict, "", shown, "0 failed polls, load run to plan", detail)


def _metrics(baseline: GateMeasurement, new: GateMeasurement, rule: str) -> GateCheck:
    """One metrics rule over the new server's /metrics text (the baseline's value is shown)."""
    name = f"metrics: {rule}"
    try:
        parsed = parse_rule(rule)
    except ValueError as error:
        return GateCheck(name, Verdict.FAIL, "", "", "", str(error))
    passed, detail = evaluate(parsed, new.metrics_before, new.metrics_after, new.metrics_error)
    text_missing = new.metrics_after is None or (
        parsed.fn == "delta" and new.metrics_before is None
    )
    verdict = Verdict.NO_DATA if text_missing else _holds(passed)
    base, _ = measure(parsed, baseline.metrics_before, baseline.metrics_after)
    now, _ = measure(parsed, new.metrics_before, new.metrics_after)
    shown_base = format_number(base) if base is not None else ""
    shown_new = format_number(now) if now is not None else "missing"
    return GateCheck(name, verdict, shown_base, shown_new, parsed.requirement, detail)


def _holds(held: bool) -> Verdict:
    """PASS when a rule over measured data held, else FAIL."""
    return Verdict.PASS if held else Verdict.FAIL


def _listed(values: list[float]) -> str:
    """Numbers shown as "115.6, 117.0" ("none" when empty)."""
    return ", ".join(f"{v:.1f}" for v in values) or "none"
