"""Rollout logic with host functions that never touch the network (transports open lazily)."""

from __future__ import annotations

import threading
import time

from ddtree_deploy.events import Event
from ddtree_deploy.fleet import RolloutPolicy, parse_batches, parse_count, run_rollout
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.results import HostResult, Outcome


def hosts(count: int) -> list[Host]:
    return [Host(name=f"h{i}", address="127.0.0.1") for i in range(count)]


class Script:
    """A fake push: fails on the named hosts, records start order and peak concurrency."""

    def __init__(self, failing: set[str] = frozenset(), sleep_s: float = 0.0):
        self.failing = failing
        self.sleep_s = sleep_s
        self.started: list[str] = []
        self.undone: list[str] = []
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def push(self, run: HostRun) -> HostResult:
        name = run.host.name
        with self._lock:
            self.started.append(name)
            self.running += 1
            self.peak = max(self.peak, self.running)
        run.recorder.start("install")
        time.sleep(self.sleep_s)
        with self._lock:
            self.running -= 1
        if name in self.failing:
            run.recorder.fail("install", "boom")
            return run.result(Outcome.ROLLED_BACK, "boom; rolled back", deploy_id=f"d-{name}")
        run.recorder.ok("install")
        return run.result(Outcome.OK, "deployed", deploy_id=f"d-{name}", version_now="x@1")

    def undo(self, run: HostRun, done: HostResult) -> HostResult:
        assert done.deploy_id == f"d-{run.host.name}"
        self.undone.append(run.host.name)
        run.recorder.ok("rollback")
        return run.result(Outcome.OK, f"rolled back {done.deploy_id}")


def rollout(script: Script, count: int, **policy):
    events: list[Event] = []
    result = run_rollout(
        hosts(count), script.push, "run1", events.append, RolloutPolicy(**policy), script.undo
    )
    return result, events


def outcomes(result) -> list[str]:
    return [r.outcome.value for r in result.results]


def test_parallel_is_bounded_and_everyone_runs():
    script = Script(sleep_s=0.05)
    result, events = rollout(script, 8, parallel=3)
    assert sorted(script.started) == [f"h{i}" for i in range(8)]
    assert script.peak <= 3 and script.peak >= 2
    assert outcomes(result) == ["ok"] * 8 and result.stopped is None
    assert script.undone == []
    summaries = [e for e in events if e.stage == "summary"]
    assert [e.host for e in summaries].count("h0") == 1 and len(summaries) == 8


def test_canary_failure_starts_nobody_else():
    script = Script(failing={"h0"})
    result, events = rollout(script, 5, canary=1)
    assert script.started == ["h0"]
    assert outcomes(result) == ["rolled_back"] + ["not_started"] * 4
    assert result.stopped == "canary failed on 1 host(s)"
    skipped = [e for e in events if e.event == "skip"]
    assert [(e.host, e.stage) for e in skipped] == [(f"h{i}", "connect") for i in range(1, 5)]


def test_max_fail_zero_stops_later_waves_and_undoes_what_this_run_changed():
    script = Script(failing={"h2"})
    result, _ = rollout(
        script, 6, parallel=1, batches=parse_batches("2"), max_fail=parse_count("0")
    )
    assert script.undone == ["h0", "h1"]  # earlier wave undone: the fleet ends where it began
    by_host = {r.host: r for r in result.results}
    assert by_host["h2"].outcome == Outcome.ROLLED_BACK
    assert by_host["h4"].outcome == Outcome.NOT_STARTED
    assert by_host["h5"].outcome == Outcome.NOT_STARTED
    assert by_host["h0"].outcome == Outcome.ROLLED_BACK and "fleet stopped" in by_host["h0"].message
    # parallel=1: h3 is still waiting when h2 fails, so it never starts
    assert script.started == ["h0", "h1", "h2"] and by_host["h3"].outcome == Outcome.NOT_STARTED


def test_no_rollback_on_abort_keeps_earlier_waves():
    script = Script(failing={"h2"})
    result, _ = rollout(
        script,
        6,
        batches=parse_batches("2"),
        max_fail=parse_count("0"),
        rollback_on_abort=False,
    )
    assert script.undone == []
    assert outcomes(result)[:2] == ["ok", "ok"] and outcomes(result)[4:] == ["not_started"] * 2


def test_failures_within_max_fail_keep_going():
    script = Script(failing={"h1", "h4"})
    result, _ = rollout(script, 6, batches=parse_batches("2"), max_fail=parse_count("34%"))
    assert result.stopped is None and script.undone == []
    assert outcomes(result).count("ok") == 4


def test_a_bug_in_one_host_fn_is_a_result():
    def explode(run: HostRun) -> HostResult:
        if run.host.name == "h1":
            raise ValueError("bug")
        return run.result(Outcome.NO_CHANGES, "no changes")

    result = run_rollout(hosts(3), explode, "r", lambda e: None, RolloutPolicy())
    assert outcomes(result) == ["no_changes", "needs_attention", "no_changes"]
    assert "ValueError: bug" in result.results[1].message
