"""Time to a verified server, derived from a push's `--json` events (pure: no I/O; the unit
tests in tests/bench/test_verified.py feed it recorded event lists).

A push with every gate reports one `start` and one `ok`/`fail` line per stage and host
(docs/ci.md). A stage's time is the `duration_s` of its end line; what no stage accounts for
(CLI start-up, connect, round trips, wind-down) is the push's wall minus the stages' sum,
shown as its own row. Each stage is marked by what serves meanwhile: the OLD server for every
stage before the restart (those could all run while traffic is still served by the old
code), nothing during drain/restart/health (the downtime), the NEW server from verify on.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from ddtree_deploy.events import Stage

# Push order (Stage is declared in it); the stages a push can report for one host.
PUSH_ORDER: tuple[str, ...] = tuple(
    s.value
    for s in Stage
    if s not in (Stage.INPUT, Stage.ROLLBACK, Stage.RECOVER)
    and s.value not in ("status", "check", "history", "summary")
)
OLD_SERVES, DOWN, NEW_SERVES = "yes", "no (down)", "no (new server)"
_DOWN_STAGES = {Stage.DRAIN.value, Stage.RESTART.value, Stage.HEALTH.value}
UNACCOUNTED = "unaccounted (start-up, connect, round trips, wind-down)"
TOTAL = "total (push wall)"
OLD_PHASE = "before the restart, end to end (old server serving)"


def serving_during(stage: str) -> str:
    """What serves traffic while `stage` runs on a host: OLD_SERVES, DOWN or NEW_SERVES."""
    if stage in _DOWN_STAGES:
        return DOWN
    at = PUSH_ORDER.index(stage) if stage in PUSH_ORDER else len(PUSH_ORDER)
    return OLD_SERVES if at < PUSH_ORDER.index(Stage.DRAIN.value) else NEW_SERVES


def stage_seconds(events: Iterable[dict], host: str) -> dict[str, float]:
    """stage -> seconds for one host, in push order: each stage's end line's duration_s
    (a stage reported twice, e.g. unlock on a failure path, is summed). Raises ValueError
    when a stage failed: a failed push has no time to a verified server."""
    found: dict[str, float] = {}
    for event in events:
        if event.get("host") != host or event.get("stage") not in PUSH_ORDER:
            continue
        if event["event"] == "fail":
            raise ValueError(f"{host}: stage {event['stage']} failed: {event.get('message')}")
        if event["event"] == "ok":
            found[event["stage"]] = found.get(event["stage"], 0.0) + (event["duration_s"] or 0)
    return {stage: found[stage] for stage in PUSH_ORDER if stage in found}


def run_breakdown(
    events: list[dict], host: str, wall_s: float, overlapped: Iterable[str] = ()
) -> dict[str, float]:
    """One run's breakdown: stage -> seconds, then UNACCOUNTED (wall minus the stages,
    never below 0) and TOTAL (the push's wall as the bench measured it). `overlapped`:
    stages that ran inside another one's time (the reference beside smoke's suites): shown,
    not subtracted from the wall."""
    stages = stage_seconds(events, host)
    if not stages:
        raise ValueError(f"{host}: the push reported no stage")
    counted_s = sum(s for stage, s in stages.items() if stage not in set(overlapped))
    return {**stages, UNACCOUNTED: max(0.0, wall_s - counted_s), TOTAL: wall_s}


def summarise_breakdowns(runs: list[dict[str, float]]) -> list[dict]:
    """Rows over N runs, in push order then UNACCOUNTED and TOTAL: {stage, median_s, min_s,
    max_s, runs, serving, share} with share = median / median total (a stage a run did not
    report counts 0 in that run)."""
    if not runs:
        return []
    names = [n for n in (*PUSH_ORDER, UNACCOUNTED, TOTAL) if any(n in r for r in runs)]
    total = statistics.median(r[TOTAL] for r in runs)
    rows = []
    for name in names:
        samples = [r.get(name, 0.0) for r in runs]
        median = statistics.median(samples)
        rows.append({
            "stage": name,
            "median_s": round(median, 3),
            "min_s": round(min(samples), 3),
            "max_s": round(max(samples), 3),
            "runs": len(samples),
            "serving": serving_during(name) if name in PUSH_ORDER else "—",
            "share": round(median / total, 3) if total > 0 else 0.0,
        })  # fmt: skip
    return rows


def suite_seconds(events: Iterable[dict], host: str) -> dict[str, float]:
    """`stage: suite` -> seconds for one host, from the suites' info lines (data.suite,
    data.duration_s; a skipped suite that reports none counts 0): inside smoke, reference
    and verify, each suite is one process on the host (smoke's one after another, the
    reference's beside them; after them on the serial path before the cut)."""
    found: dict[str, float] = {}
    for event in events:
        data = event.get("data") or {}
        if event.get("host") != host or event.get("event") != "info" or "suite" not in data:
            continue
        found[f"{event['stage']}: {data['suite']}"] = float(data.get("duration_s") or 0.0)
    return found


def summarise_suites(runs: list[dict[str, float]]) -> list[dict]:
    """Rows over N runs of suite_seconds: {stage ("stage: suite"), median_s, min_s, max_s,
    runs, serving}, in the order first seen (a suite a run did not report counts 0)."""
    names: list[str] = []
    for run in runs:
        names += [n for n in run if n not in names]
    rows = []
    for name in names:
        samples = [r.get(name, 0.0) for r in runs]
        rows.append({
            "stage": name,
            "median_s": round(statistics.median(samples), 3),
            "min_s": round(min(samples), 3),
            "max_s": round(max(samples), 3),
            "runs": len(samples),
            "serving": serving_during(name.split(":", 1)[0]),
        })  # fmt: skip
    return rows


def phase_totals(rows: list[dict], overlapped: Iterable[str] = ()) -> dict[str, float]:
    """Median seconds by what serves meanwhile (OLD_SERVES, DOWN, NEW_SERVES): the time a
    push spends before the old server goes away, the downtime and the verifying after
    (`overlapped` stages ran inside another one's time: not added)."""
    totals = {OLD_SERVES: 0.0, DOWN: 0.0, NEW_SERVES: 0.0}
    skip = set(overlapped)
    for row in rows:
        if row["serving"] in totals and row["stage"] not in skip:
            totals[row["serving"]] += row["median_s"]
    return {k: round(v, 3) for k, v in totals.items()}


def old_phase_s(breakdown: dict[str, float], overlapped: Iterable[str] = ()) -> float:
    """Seconds the stages before the restart took end to end (the old server serving):
    their sum, less the `overlapped` ones (they ran inside another stage's time)."""
    skip = set(overlapped)
    return sum(
        s for stage, s in breakdown.items()
        if stage in PUSH_ORDER and stage not in skip and serving_during(stage) == OLD_SERVES
    )  # fmt: skip


def paired_cut(
    pairs: list[tuple[dict[str, float], dict[str, float]]], overlapped: Iterable[str] = ()
) -> list[dict]:
    """Rows over N interleaved pairs of breakdowns (before, after): each stage either side
    reported, then OLD_PHASE (old_phase_s; `overlapped` applies to the after side) and
    TOTAL, as {stage, before_s, after_s, saved_s, saved_min_s, saved_max_s, runs}: medians
    of each side and of the per-pair saving (before − after; a stage a run did not report
    counts 0), with the savings' spread."""
    overlapped = tuple(overlapped)
    sides = [
        ({**b, OLD_PHASE: old_phase_s(b)}, {**a, OLD_PHASE: old_phase_s(a, overlapped)})
        for b, a in pairs
    ]
    names = [n for n in (*PUSH_ORDER, OLD_PHASE, TOTAL) if any(n in b or n in a for b, a in sides)]
    rows = []
    for name in names:
        before = [b.get(name, 0.0) for b, _ in sides]
        after = [a.get(name, 0.0) for _, a in sides]
        saved = [x - y for x, y in zip(before, after, strict=True)]
        rows.append({
            "stage": name + (" (beside smoke after)" if name in overlapped else ""),
            "before_s": round(statistics.median(before), 3),
            "after_s": round(statistics.median(after), 3),
            "saved_s": round(statistics.median(saved), 3),
            "saved_min_s": round(min(saved), 3),
            "saved_max_s": round(max(saved), 3),
            "runs": len(pairs),
        })  # fmt: skip
    return rows
