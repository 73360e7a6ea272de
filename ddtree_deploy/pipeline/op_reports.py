"""What an op's answer says beside ok/failed, as info events: one reporter per op name.

`HostRun.call` sends and ends stages; the op-specific lines are here, registered once in
`REPORTERS` (the idea of httpx's response event hooks: per-answer side work outside `send`).
Each reporter reads one op's result (failed ones too: a failed health still carries the
start-up watchdog's progress) and tells the stage's recorder what it saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ddtree_deploy.agent import Op, OpResult
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_outcomes import (
    HealthResult,
    JournalAppended,
    RestartResult,
    ServiceFailure,
)
from ddtree_deploy.events import HostRecorder, Stage

# (recorder, stage, result, the run's warnings): a warning goes on the host's result.
Reporter = Callable[[HostRecorder, Stage, OpResult, list[str]], None]


def report_clean_start(
    recorder: HostRecorder, stage: Stage, result: OpResult, warnings: list[str]
) -> None:
    """The restart's clean-start check: each leftover process it ended, then (when the GPU
    was checked) one summary line."""
    restarted = result.data_or_none(RestartResult) if result.ok else None
    if restarted is None:
        return
    ended = restarted.leftovers_ended or []
    for proc in ended:
        message = f"ended leftover pid {proc['pid']} ({proc['why']}): {proc['cmdline']}"
        recorder.info(stage, message, {"leftover": proc})
    if (gpu := restarted.gpu) is not None:
        clean = f"ended {len(ended)} leftover processes" if ended else "nothing left behind"
        summary = {"leftovers_ended": len(ended), "gpu": gpu}
        recorder.info(stage, f"clean start: {clean}; {gpu}", {"clean_start": summary})


def report_progress(
    recorder: HostRecorder, stage: Stage, result: OpResult, warnings: list[str]
) -> None:
    """The health op's start-up watchdog: each progress line, with its time since the start
    (a failed health check carries the progress it saw too)."""
    answer = result.data_or_none(HealthResult) if result.ok else result.data_or_none(ServiceFailure)
    for mark in (answer.progress if answer is not None else None) or ():
        recorder.info(stage, f"after {mark['after_s']}s: {mark['line']}", {"progress": mark})


def report_journal(
    recorder: HostRecorder, stage: Stage, result: OpResult, warnings: list[str]
) -> None:
    """The journal's rotation (state.rotate_journal on the host): done, or failed. A failed
    rotation never fails the op (the entry landed in the old journal and the next append
    retries), so it becomes a warning on the result, once per run."""
    if not result.ok:
        return
    appended = result.data_or_none(JournalAppended)
    if appended is None:  # not its record: nothing to report
        return
    if appended.rotated is not None:
        message = f"journal rotated: {appended.rotated} entries carried, the old one kept"
        recorder.info(stage, message, {"journal_rotated": appended.rotated})
    if why := appended.rotate_error:
        warning = f"journal not rotated: {why}"
        recorder.info(stage, f"{warning} (the entry landed; the next append retries)")
        if warning not in warnings:  # each journal op of the run retries
            warnings.append(warning)


REPORTERS: dict[OpName, Reporter] = {
    OpName.RESTART: report_clean_start,
    OpName.HEALTH: report_progress,
    OpName.JOURNAL: report_journal,
}


def report_results(
    recorder: HostRecorder, stage: Stage, results: Sequence[OpResult], warnings: list[str]
) -> None:
    """Run each result's reporter, in the order the host ran the ops."""
    for result in results:
        reporter = REPORTERS.get(result.op)
        if reporter is not None:
            reporter(recorder, stage, result, warnings)


# the answers that name their service (a host may run several)
_ANSWERS: dict[OpName, type[RestartResult | HealthResult]] = {
    OpName.RESTART: RestartResult,
    OpName.HEALTH: HealthResult,
}


def report_each_service(
    recorder: HostRecorder, steps: Sequence[tuple[Stage, Op]], results: Sequence[OpResult]
) -> None:
    """On a host with several services: one info event per service restarted or healthy,
    in the order the host ran them (a stage's events gather its ops, so restart and health
    of interleaved services would otherwise lose their order)."""
    for (stage, _), result in zip(steps, results, strict=False):
        answer = result.data_or_none(_ANSWERS[result.op]) if result.op in _ANSWERS else None
        if result.ok and answer is not None and answer.service is not None:
            done = "restarted" if result.op == OpName.RESTART else "healthy"
            name, took = answer.service, round(result.duration_s, 3)
            recorder.info(stage, f"{name}: {done} in {took}s", {"service": name, result.op: took})
