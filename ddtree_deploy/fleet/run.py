"""Run one per-host function across hosts: bounded concurrency, canary, waves, max-fail, undo.

Each host gets one transport (one SSH connection) for the whole command: a host whose change
may still be undone keeps its connection open until the run ends, and the undo reuses it.
The policy (`RolloutPolicy`, waves) is fleet/policy.py; connections the CLI opened before
the run started are taken from fleet/ahead.py.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ddtree_deploy.events import EventSink, HostRecorder, Stage
from ddtree_deploy.fleet import ahead
from ddtree_deploy.fleet.policy import RolloutPolicy, Wave, plan_waves, stop_reason
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.transport import Transport, open_transport

HostFn = Callable[[HostRun], HostResult]
# Undo a host's successful change after the fleet stopped: (its run, the result it ended with).
UndoFn = Callable[[HostRun, HostResult], HostResult]
# A restart group's members run together: their runs in member order -> their results.
GroupFn = Callable[[list[HostRun]], list[HostResult]]
GroupUndoFn = Callable[[list[HostRun], list[HostResult]], list[HostResult]]


def host_transport(host: Host) -> Transport:
    """The transport of `host` for this command: the connection the CLI opened ahead for
    it (fleet/ahead.py), else a new one that connects at its first request."""
    return ahead.take(host) or open_transport(host)


@dataclass(frozen=True)
class GroupUnit:
    """Hosts the fleet runs as ONE unit (a restart group): one slot of a wave, one failure
    for max-fail and canary, their function run with all of them, undone together."""

    name: str
    members: tuple[str, ...]
    fn: GroupFn
    undo: GroupUndoFn | None = None

    @property
    def key(self) -> str:
        return f"group {self.name}"


SUCCESS = frozenset({Outcome.OK, Outcome.NO_CHANGES})


@dataclass
class FleetResult:
    """Every selected host's result in selection order, the waves planned, and why it stopped."""

    results: list[HostResult]
    waves: list[Wave]
    stopped: str | None = None

    @property
    def succeeded(self) -> list[HostResult]:
        return [r for r in self.results if r.outcome in SUCCESS]

    @property
    def failed(self) -> list[HostResult]:
        return [r for r in self.results if r.outcome not in SUCCESS | {Outcome.NOT_STARTED}]

    @property
    def not_started(self) -> list[HostResult]:
        return [r for r in self.results if r.outcome == Outcome.NOT_STARTED]


class _HostSession:
    """One host's transport, recorder and run for the whole command."""

    def __init__(
        self,
        host: Host,
        run_id: str,
        sink: EventSink,
        wave: str = "",
        group: GroupUnit | None = None,
    ):
        self.group = group
        self.recorder = HostRecorder(host=host.name, run_id=run_id, sink=sink)
        self.transport = host_transport(host)
        self.run = HostRun(
            host=host, transport=self.transport, recorder=self.recorder, run_id=run_id
        )
        self.wave = wave
        self.duration_s = 0.0

    def attempt(self, fn: HostFn) -> HostResult:
        """fn on this host, timed; a bug in fn becomes NEEDS_ATTENTION, not a dead fleet."""
        started = time.monotonic()
        try:
            result = fn(self.run)
        except Exception as exc:  # one host's bug must not kill the fleet
            result = self.run.result(
                Outcome.NEEDS_ATTENTION, f"internal error: {type(exc).__name__}: {exc}"
            )
        self.duration_s += time.monotonic() - started
        return result

    def finish(self, result: HostResult) -> HostResult:
        """Close the transport, emit the host's one `summary` event; return the result
        stamped with duration and wave."""
        self.transport.close()
        return summarise(self.recorder, result, self.duration_s, self.wave, self.group)


def summarise(
    recorder: HostRecorder,
    result: HostResult,
    duration_s: float,
    wave: str,
    group: GroupUnit | None = None,
) -> HostResult:
    """Emit the host's `summary` info event (with `become`: ok or sudo's refusal, when the
    host uses it; `group` and `members` for a member of a restart group); return the result
    with duration, wave and group stamped into its details (kept where they were set)."""
    stamps: dict[str, Any] = {
        "duration_s": round(duration_s, 3),
        **({"wave": wave} if wave else {}),
    }
    if group is not None:
        stamps["group"] = group.name
    result = dataclasses.replace(result, details={**stamps, **result.details})
    recorder.info(
        Stage.SUMMARY,
        result.shown_message,
        data={
            "outcome": result.outcome.value,
            "deploy_id": result.deploy_id,
            "version_now": result.version_now,
            "duration_s": result.details["duration_s"],
            "wave": wave or None,
            **({"become": result.details["become"]} if "become" in result.details else {}),
            **({"warnings": result.details["warnings"]} if "warnings" in result.details else {}),
            **({"group": group.name, "members": list(group.members)} if group else {}),
        },
    )
    return result


def run_rollout(
    hosts: list[Host],
    fn: HostFn,
    run_id: str,
    sink: EventSink,
    policy: RolloutPolicy,
    undo: UndoFn | None = None,
    groups: tuple[GroupUnit, ...] = (),
) -> FleetResult:
    """fn on every host wave by wave; after a stop, undo the hosts this run changed.

    `groups`: restart groups among the hosts (every member selected): each is one unit of
    the waves, run with its own function on all its members at once.

    A host not started when the fleet stops ends NOT_STARTED (a `connect` skip event) and is
    never touched. With `undo` and `policy.rollback_on_abort`, every host that ended OK with a
    deploy_id is undone once the failed wave has settled, so the fleet ends where it began.
    """
    rollout = _Rollout(hosts, fn, run_id, sink, policy, undo, groups)
    return rollout.run()


@dataclass
class _Rollout:
    hosts: list[Host]
    fn: HostFn
    run_id: str
    sink: EventSink
    policy: RolloutPolicy
    undo: UndoFn | None
    groups: tuple[GroupUnit, ...] = ()
    results: dict[str, HostResult] = field(default_factory=dict)
    kept: dict[str, _HostSession] = field(default_factory=dict)
    kept_groups: dict[str, list[_HostSession]] = field(default_factory=dict)
    failed: int = 0
    failed_in_wave: dict[int, int] = field(default_factory=dict)
    stopped: str | None = None
    waves: list[Wave] = field(default_factory=list)
    units: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> FleetResult:
        by_name = {h.name: h for h in self.hosts}
        units = {g.key: g for g in self.groups}
        unit_of = {member: g.key for g in self.groups for member in g.members}
        keys = list(dict.fromkeys(unit_of.get(h.name, h.name) for h in self.hosts))
        self.units = len(keys)
        waves = self.waves = plan_waves(keys, self.policy.canary, self.policy.batches)
        workers = max(1, min(self.policy.parallel, len(keys)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for wave in waves:
                if self.stopped:
                    break
                list(
                    pool.map(
                        lambda key, w=wave: (
                            self._start_group(units[key], by_name, w)
                            if key in units
                            else self._start(by_name[key], w)
                        ),
                        wave.hosts,
                    )
                )
            wave_of = {
                member: _label(w, waves)
                for w in waves
                for key in w.hosts
                for member in (units[key].members if key in units else (key,))
            }
            for host in self.hosts:
                if host.name not in self.results:
                    self._skip(host, wave_of.get(host.name, ""))
            undoing = self.stopped and self.undo and self.policy.rollback_on_abort
            if undoing and self.kept:
                list(pool.map(self._undo, list(self.kept)))
            if undoing and self.kept_groups:
                list(pool.map(lambda key: self._undo_group(units[key]), list(self.kept_groups)))
        for name, session in list(self.kept.items()):
            self.results[name] = session.finish(self.results[name])
        for group_sessions in self.kept_groups.values():
            for session in group_sessions:
                name = session.run.host.name
                self.results[name] = session.finish(self.results[name])
        ordered = [self.results[h.name] for h in self.hosts]
        return FleetResult(ordered, waves, self.stopped)

    def _start(self, host: Host, wave: Wave) -> None:
        with self._lock:
            if self.stopped:
                return  # becomes NOT_STARTED below
        session = _HostSession(host, self.run_id, self.sink, _label(wave, self.waves))
        result = session.attempt(self.fn)
        keep = (
            self.undo is not None
            and self.policy.rollback_on_abort
            and result.outcome == Outcome.OK
            and result.deploy_id is not None
        )
        with self._lock:
            self.results[host.name] = result
            if keep:
                self.kept[host.name] = session
            if result.outcome not in SUCCESS:
                self._count_failure(wave)
        if not keep:
            finished = session.finish(result)
            with self._lock:
                self.results[host.name] = finished

    def _count_failure(self, wave: Wave) -> None:
        """One unit of `wave` failed: count it, and stop the fleet when the policy says so
        (call with the lock held)."""
        self.failed += 1
        self.failed_in_wave[wave.index] = self.failed_in_wave.get(wave.index, 0) + 1
        if self.stopped is None:
            self.stopped = stop_reason(
                wave, self.failed_in_wave[wave.index], self.failed, self.units, self.policy.max_fail
            )

    def _start_group(self, group: GroupUnit, by_name: dict[str, Host], wave: Wave) -> None:
        """The group's function on all its members at once; one failure for the unit."""
        with self._lock:
            if self.stopped:
                return  # its members become NOT_STARTED below
        label = _label(wave, self.waves)
        sessions = [
            _HostSession(by_name[m], self.run_id, self.sink, label, group) for m in group.members
        ]
        runs = [session.run for session in sessions]
        started = time.monotonic()
        try:
            results = group.fn(runs)
        except Exception as exc:  # a bug in the group's run must not kill the fleet
            why = f"internal error: {type(exc).__name__}: {exc}"
            results = [run.result(Outcome.NEEDS_ATTENTION, why) for run in runs]
        for session in sessions:
            session.duration_s += time.monotonic() - started
        ok = all(r.outcome in SUCCESS for r in results)
        keep = (
            group.undo is not None
            and self.undo is not None
            and self.policy.rollback_on_abort
            and all(r.outcome == Outcome.OK and r.deploy_id for r in results)
        )
        with self._lock:
            for result in results:
                self.results[result.host] = result
            if keep:
                self.kept_groups[group.key] = sessions
            if not ok:
                self._count_failure(wave)
        if not keep:
            for session, result in zip(sessions, results, strict=True):
                finished = session.finish(result)
                with self._lock:
                    self.results[result.host] = finished

    def _undo_group(self, group: GroupUnit) -> None:
        """Undo a group this run deployed, together (after the fleet stopped)."""
        sessions = self.kept_groups[group.key]
        done = [self.results[s.run.host.name] for s in sessions]
        assert group.undo is not None  # only groups kept for an undo get here
        try:
            undone = group.undo([s.run for s in sessions], done)
        except Exception as exc:  # as for one host: a result, not a dead fleet
            why = f"internal error: {type(exc).__name__}: {exc}"
            undone = [s.run.result(Outcome.NEEDS_ATTENTION, why) for s in sessions]
        for session, before, after in zip(sessions, done, undone, strict=True):
            if after.outcome in (Outcome.OK, Outcome.ROLLED_BACK):
                outcome = Outcome.ROLLED_BACK
                message = f"deployed, then rolled back with group {group.name}: fleet stopped"
            else:
                outcome = Outcome.NEEDS_ATTENTION
                message = f"deployed; the group's rollback after the stop failed: {after.message}"
            self.results[before.host] = HostResult(
                host=before.host,
                outcome=outcome,
                message=message,
                deploy_id=before.deploy_id,
                details={**before.details, "undo": after.message},
                records=session.recorder.records,
            )

    def _skip(self, host: Host, wave: str) -> None:
        recorder = HostRecorder(host=host.name, run_id=self.run_id, sink=self.sink)
        reason = f"not started: fleet stopped ({self.stopped})"
        recorder.skip(Stage.CONNECT, reason)
        result = HostResult(host.name, Outcome.NOT_STARTED, reason, records=recorder.records)
        self.results[host.name] = summarise(recorder, result, 0.0, wave)

    def _undo(self, name: str) -> None:
        session = self.kept[name]
        done = self.results[name]
        undo = self.undo
        assert undo is not None  # only hosts kept for an undo get here
        undone = session.attempt(lambda run: undo(run, done))
        if undone.outcome in (Outcome.OK, Outcome.ROLLED_BACK):
            outcome = Outcome.ROLLED_BACK
            message = f"deployed, then rolled back: fleet stopped ({self.stopped})"
        else:
            outcome = Outcome.NEEDS_ATTENTION
            message = f"deployed; rollback after the fleet stopped failed: {undone.message}"
        self.results[name] = HostResult(
            host=name,
            outcome=outcome,
            message=message,
            deploy_id=done.deploy_id,
            details={**done.details, "undo": undone.message},
            records=session.recorder.records,
        )


def _label(wave: Wave, waves: list[Wave]) -> str:
    """The wave's name, or "" when the whole run was one plain wave (nothing to tell)."""
    return wave.label if len(waves) > 1 or wave.canary else ""
