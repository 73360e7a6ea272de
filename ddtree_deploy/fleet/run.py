"""Run one per-host function across hosts: bounded concurrency, canary, waves, max-fail, undo.

One unit type: a restart group's hosts run as one unit, and a lone host is a unit of one,
so both go through the same start, failure count and undo. The only threads are here: the
waves' pool and `each_at_once`, which a unit's function gets for its members' steps.

Each host gets one transport (one SSH connection) for the whole command: a host whose change
may still be undone keeps its connection open until the run ends, and the undo reuses it.
The policy (`RolloutPolicy`, waves) is fleet/policy.py; connections the CLI opened before
the run started are taken from fleet/ahead.py.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from ddtree_deploy.events import EventSink, HostRecorder, Stage
from ddtree_deploy.fleet import ahead
from ddtree_deploy.fleet.policy import RolloutPolicy, Wave, plan_waves, stop_reason
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.pipeline.group import MapEach
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.transport import Transport, open_transport

HostFn = Callable[[HostRun], HostResult]
# Undo a host's successful change after the fleet stopped: (its run, the result it ended with).
UndoFn = Callable[[HostRun, HostResult], HostResult]
# A unit's members run together: (their runs in member order, the fleet's `each_at_once`
# for what they do at the same time) -> their results in the same order.
GroupFn = Callable[[list[HostRun], MapEach], list[HostResult]]
GroupUndoFn = Callable[[list[HostRun], list[HostResult], MapEach], list[HostResult]]
T = TypeVar("T")
R = TypeVar("R")


def host_transport(host: Host) -> Transport:
    """The transport of `host` for this command: the connection the CLI opened ahead for
    it (fleet/ahead.py), else a new one that connects at its first request."""
    return ahead.take(host) or open_transport(host)


@dataclass(frozen=True)
class GroupUnit:
    """Hosts the fleet runs as ONE unit (a restart group): one slot of a wave, one failure
    for max-fail and canary, their function run with all of them, undone together.

    `fn` and `undo` get the fleet's `each_at_once` to run member steps at the same time
    (pipeline/group.py starts no threads of its own)."""

    name: str
    members: tuple[str, ...]
    fn: GroupFn
    undo: GroupUndoFn | None = None

    @property
    def key(self) -> str:
        return f"group {self.name}"


def each_at_once(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """fn on every item at the same time, one thread each; the results in item order.

    The `MapEach` a unit's function gets: the only place a restart group's members run in
    parallel (house rule 10: concurrency lives in fleet/). An exception in fn propagates."""
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return list(pool.map(fn, items))


@dataclass(frozen=True)
class _Unit:
    """What the runner starts, counts and undoes: a restart group, or a lone host as a
    group of one (its function wrapped to take and give lists)."""

    key: str
    members: tuple[str, ...]
    fn: GroupFn
    undo: GroupUndoFn | None
    group: GroupUnit | None = None  # None: a lone host

    @classmethod
    def single(cls, name: str, fn: HostFn, undo: UndoFn | None) -> _Unit:
        def run_one(runs: list[HostRun], each: MapEach) -> list[HostResult]:
            return [fn(runs[0])]

        def undo_one(
            runs: list[HostRun], done: list[HostResult], each: MapEach
        ) -> list[HostResult]:
            assert undo is not None  # only built with an undo
            return [undo(runs[0], done[0])]

        return cls(name, (name,), run_one, undo_one if undo is not None else None)

    @classmethod
    def of_group(cls, group: GroupUnit, undo: UndoFn | None) -> _Unit:
        """The group's unit; it is undone only when the fleet has an undo as well."""
        return cls(group.key, group.members, group.fn, group.undo if undo else None, group)


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
    stamps: HostDetails = {"duration_s": round(duration_s, 3)}
    if wave:
        stamps["wave"] = wave
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
    the waves, run with its own function on all its members at once. Every other host is
    a unit of one; both go through the same start, failure count and undo.

    A host not started when the fleet stops ends NOT_STARTED (a `connect` skip event) and is
    never touched. With `undo` and `policy.rollback_on_abort`, every unit whose hosts all
    ended OK with a deploy_id is undone once the failed wave has settled, so the fleet ends
    where it began.
    """
    grouped = {member: g for g in groups for member in g.members}
    units: dict[str, _Unit] = {}
    for host in hosts:
        if (group := grouped.get(host.name)) is not None:
            units.setdefault(group.key, _Unit.of_group(group, undo))
        else:
            units[host.name] = _Unit.single(host.name, fn, undo)
    return _Rollout(hosts, units, run_id, sink, policy).run()


@dataclass
class _Rollout:
    hosts: list[Host]
    units: dict[str, _Unit]  # by key, in selection order
    run_id: str
    sink: EventSink
    policy: RolloutPolicy
    results: dict[str, HostResult] = field(default_factory=dict)
    kept: dict[str, list[_HostSession]] = field(default_factory=dict)  # unit key -> sessions
    failed: int = 0
    failed_in_wave: dict[int, int] = field(default_factory=dict)
    stopped: str | None = None
    waves: list[Wave] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> FleetResult:
        by_name = {h.name: h for h in self.hosts}
        waves = self.waves = plan_waves(list(self.units), self.policy.canary, self.policy.batches)
        workers = max(1, min(self.policy.parallel, len(self.units)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for wave in waves:
                if self.stopped:
                    break
                list(pool.map(lambda key, w=wave: self._start(self.units[key], by_name, w),
                              wave.hosts))  # fmt: skip
            wave_of = {
                member: _label(w, waves)
                for w in waves
                for key in w.hosts
                for member in self.units[key].members
            }
            for host in self.hosts:
                if host.name not in self.results:
                    self._skip(host, wave_of.get(host.name, ""))
            if self.stopped and self.policy.rollback_on_abort and self.kept:
                list(pool.map(self._undo, list(self.kept)))
        for sessions in self.kept.values():
            for session in sessions:
                name = session.run.host.name
                self.results[name] = session.finish(self.results[name])
        ordered = [self.results[h.name] for h in self.hosts]
        return FleetResult(ordered, waves, self.stopped)

    def _start(self, unit: _Unit, by_name: dict[str, Host], wave: Wave) -> None:
        """The unit's function on all its hosts at once; one failure for the unit."""
        with self._lock:
            if self.stopped:
                return  # its hosts become NOT_STARTED
        label = _label(wave, self.waves)
        sessions = [
            _HostSession(by_name[m], self.run_id, self.sink, label, unit.group)
            for m in unit.members
        ]
        results = _timed(sessions, lambda runs: unit.fn(runs, each_at_once))
        keep = (
            unit.undo is not None
            and self.policy.rollback_on_abort
            and all(r.outcome == Outcome.OK and r.deploy_id is not None for r in results)
        )
        with self._lock:
            for result in results:
                self.results[result.host] = result
            if keep:
                self.kept[unit.key] = sessions
            if any(r.outcome not in SUCCESS for r in results):
                self._count_failure(wave)
        if not keep:
            for session, result in zip(sessions, results, strict=True):
                finished = session.finish(result)
                with self._lock:
                    self.results[result.host] = finished

    def _count_failure(self, wave: Wave) -> None:
        """One unit of `wave` failed: count it, and stop the fleet when the policy says so
        (call with the lock held)."""
        self.failed += 1
        self.failed_in_wave[wave.index] = self.failed_in_wave.get(wave.index, 0) + 1
        if self.stopped is None:
            self.stopped = stop_reason(
                wave,
                self.failed_in_wave[wave.index],
                self.failed,
                len(self.units),
                self.policy.max_fail,
            )

    def _undo(self, key: str) -> None:
        """Undo a unit this run deployed (after the fleet stopped), all its hosts together."""
        unit, sessions = self.units[key], self.kept[key]
        undo = unit.undo
        assert undo is not None  # only units kept for an undo get here
        with self._lock:
            done = [self.results[s.run.host.name] for s in sessions]
        undone = _timed(sessions, lambda runs: undo(runs, done, each_at_once))
        with_group = f" with group {unit.group.name}" if unit.group is not None else ""
        for session, before, after in zip(sessions, done, undone, strict=True):
            if after.outcome in (Outcome.OK, Outcome.ROLLED_BACK):
                outcome = Outcome.ROLLED_BACK
                message = f"deployed, then rolled back{with_group}: fleet stopped ({self.stopped})"
            else:
                outcome = Outcome.NEEDS_ATTENTION
                message = f"deployed; rollback{with_group} after the fleet stopped failed: "
                message += after.message
            undone_result = HostResult(
                host=before.host,
                outcome=outcome,
                message=message,
                deploy_id=before.deploy_id,
                details={**before.details, "undo": after.message},
                records=session.recorder.records,
            )
            with self._lock:
                self.results[before.host] = undone_result

    def _skip(self, host: Host, wave: str) -> None:
        recorder = HostRecorder(host=host.name, run_id=self.run_id, sink=self.sink)
        reason = f"not started: fleet stopped ({self.stopped})"
        recorder.skip(Stage.CONNECT, reason)
        result = HostResult(host.name, Outcome.NOT_STARTED, reason, records=recorder.records)
        self.results[host.name] = summarise(recorder, result, 0.0, wave)


def _timed(
    sessions: list[_HostSession], fn: Callable[[list[HostRun]], list[HostResult]]
) -> list[HostResult]:
    """fn on the sessions' runs, its time added to each session; a bug in fn becomes
    NEEDS_ATTENTION for every host, not a dead fleet."""
    runs = [session.run for session in sessions]
    started = time.monotonic()
    try:
        results = fn(runs)
    except Exception as exc:  # one unit's bug must not kill the fleet
        why = f"internal error: {type(exc).__name__}: {exc}"
        results = [run.result(Outcome.NEEDS_ATTENTION, why) for run in runs]
    for session in sessions:
        session.duration_s += time.monotonic() - started
    return results


def _label(wave: Wave, waves: list[Wave]) -> str:
    """The wave's name, or "" when the whole run was one plain wave (nothing to tell)."""
    return wave.label if len(waves) > 1 or wave.canary else ""
