"""Run one per-host function across hosts with bounded concurrency."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ddtree_deploy.events import EventSink, HostRecorder
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostResult, HostRun, Outcome
from ddtree_deploy.transport import open_transport

HostFn = Callable[[HostRun], HostResult]


def run_one(host: Host, fn: HostFn, run_id: str, sink: EventSink) -> HostResult:
    """Open the host's transport, run fn, always close; bugs become a result, not a crash."""
    recorder = HostRecorder(host=host.name, run_id=run_id, sink=sink)
    started = time.monotonic()
    transport = open_transport(host)
    try:
        result = fn(HostRun(host=host, transport=transport, recorder=recorder, run_id=run_id))
    except Exception as exc:  # noqa: BLE001 - one host's bug must not kill the fleet
        result = HostResult(
            host.name, Outcome.NEEDS_ATTENTION, f"internal error: {type(exc).__name__}: {exc}"
        )
        result.records = recorder.records
    finally:
        transport.close()
    result.details.setdefault("duration_s", round(time.monotonic() - started, 3))
    recorder.info(
        "summary",
        result.message,
        data={
            "outcome": result.outcome.value,
            "deploy_id": result.deploy_id,
            "version_now": result.version_now,
        },
    )
    return result


def run_hosts(
    hosts: list[Host], fn: HostFn, run_id: str, sink: EventSink, parallel: int = 16
) -> list[HostResult]:
    """fn on every host, at most `parallel` at a time; results in host order."""
    if len(hosts) <= 1 or parallel <= 1:
        return [run_one(h, fn, run_id, sink) for h in hosts]
    with ThreadPoolExecutor(max_workers=min(parallel, len(hosts))) as pool:
        return list(pool.map(lambda h: run_one(h, fn, run_id, sink), hosts))
