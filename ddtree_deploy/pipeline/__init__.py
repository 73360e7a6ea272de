"""What each command does to one host; fleet/ runs these across many."""

from ddtree_deploy.pipeline.context import (
    HostResult,
    HostRun,
    Outcome,
    controller_holder,
    new_run_id,
)
from ddtree_deploy.pipeline.manage import (
    hosts_check,
    plan_files,
    plan_host,
    prune_host,
    recover_host,
    rollback_host,
    smoke_host,
    status_host,
)
from ddtree_deploy.pipeline.push import PushOptions, push_host
from ddtree_deploy.pipeline.select import per_host, pick_patchset

__all__ = [
    "HostResult",
    "HostRun",
    "Outcome",
    "PushOptions",
    "controller_holder",
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
