"""What each command does to one host; fleet/ runs these across many.

One module per command: push (with restore for its rollback, push_gate its serving gate),
rollback, recover, status, plan, smoke, prune, hosts_check, gate, capture (`patchset new
--from-host`); context holds HostRun, facts the shared first request, select the per-host
version pick.

`capture_host` (only `patchset new --from-host` uses it) is imported on first use (PEP 562).
"""

import typing

from ddtree_deploy.pipeline.context import (
    HostRun,
    controller_holder,
    new_run_id,
)
from ddtree_deploy.pipeline.gate import GateOptions, gate_host
from ddtree_deploy.pipeline.hosts_check import hosts_check
from ddtree_deploy.pipeline.plan import plan_files, plan_host
from ddtree_deploy.pipeline.prune import prune_host
from ddtree_deploy.pipeline.push import PUSH_REQUESTS, push_host
from ddtree_deploy.pipeline.push_steps import PushOptions
from ddtree_deploy.pipeline.recover import recover_host
from ddtree_deploy.pipeline.rollback import rollback_host
from ddtree_deploy.pipeline.select import per_host, pick_patchset
from ddtree_deploy.pipeline.smoke import smoke_host
from ddtree_deploy.pipeline.status import status_host

if typing.TYPE_CHECKING:
    from ddtree_deploy.pipeline.capture import capture_host


def __getattr__(name: str) -> typing.Any:
    """`capture_host`, imported when first asked for."""
    if name == "capture_host":
        from ddtree_deploy.pipeline.capture import capture_host

        return capture_host
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PUSH_REQUESTS",
    "GateOptions",
    "HostRun",
    "PushOptions",
    "capture_host",
    "controller_holder",
    "gate_host",
    "hosts_check",
    "new_run_id",
    "per_host",
    "pick_patchset",
    "plan_files",
    "plan_host",
    "prune_host",
    "push_host",
    "recover_host",
    "rollback_host",
    "smoke_host",
    "status_host",
]
