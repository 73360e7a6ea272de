"""Many hosts: bounded parallelism, canary, waves, max-fail, undo after a stop, shards.

`policy` (pure: waves, counts, shards) loads with the package; `run` (threads, the pipeline)
loads when one of its names is first used (`ddtree_deploy.lazy`), so the CLI can parse
--shard and plan waves before the pipeline's modules are loaded.
"""

import typing

from ddtree_deploy.fleet.policy import (
    Count,
    RolloutPolicy,
    Wave,
    first_started,
    max_fail_exceeded,
    parse_batches,
    parse_count,
    parse_shard,
    plan_waves,
    shard_items,
    stop_reason,
)
from ddtree_deploy.lazy import lazy_exports

if typing.TYPE_CHECKING:
    from ddtree_deploy.fleet.run import (
        SUCCESS,
        FleetResult,
        GroupUnit,
        HostFn,
        UndoFn,
        run_rollout,
    )

__getattr__ = lazy_exports(
    __name__,
    {
        "run": (
            "SUCCESS",
            "FleetResult",
            "GroupUnit",
            "HostFn",
            "UndoFn",
            "run_rollout",
        )
    },
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
    "first_started",
    "max_fail_exceeded",
    "parse_batches",
    "parse_count",
    "parse_shard",
    "plan_waves",
    "run_rollout",
    "shard_items",
    "stop_reason",
]
