"""Many hosts: bounded parallelism, canary, waves, max-fail, undo after a stop, shards."""

from ddtree_deploy.fleet.policy import (
    Count,
    Wave,
    max_fail_exceeded,
    parse_batches,
    parse_count,
    parse_shard,
    plan_waves,
    shard_items,
    stop_reason,
)
from ddtree_deploy.fleet.run import (
    SUCCESS,
    FleetResult,
    GroupUnit,
    HostFn,
    RolloutPolicy,
    UndoFn,
    run_rollout,
)

__all__ = [
    "SUCCESS",
    "Count",
    "FleetResult",
    "GroupUnit",
    "HostFn",
    "RolloutPolicy",
    "UndoFn",
    "Wave",
    "max_fail_exceeded",
    "parse_batches",
    "parse_count",
    "parse_shard",
    "plan_waves",
    "run_rollout",
    "shard_items",
    "stop_reason",
]
