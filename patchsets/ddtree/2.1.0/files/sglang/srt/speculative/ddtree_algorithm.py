"""Register DDTREE with sglang's speculative-algorithm registry (sglang 0.5.23).

DDTREE drafts a tree from one DFlash block-diffusion draft block and verifies it
against the target. It is DFlash-family: the same draft model, KV layout and V2
worker. `DDTreeSpecAlgo` therefore answers every `is_*()` / `supports_*()`
question the way the builtin DFLASH does, plus `is_ddtree()`.

ddtree 2.1.0: `create_worker` returns `DDTreeWorkerV2` (ddtree_worker_v2.py), a
DFlashWorkerV2 that verifies a DDTree of `--speculative-ddtree-budget` nodes
(`max(block, budget + 1)` verify slots per request, the width declared here). Server-arg handling is not here: a registered algorithm's
`handle_server_args` only sees a write-recording stand-in, so the arg-group hook
applies DFLASH's handler for DDTREE; the worker refuses what it cannot run.

Imported at the end of spec_info (a patchset cannot add an entry point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.spec_registry import CustomSpecAlgo, get_spec

if TYPE_CHECKING:
    from sglang.srt.server_args import ServerArgs

DDTREE = "DDTREE"

# Answered exactly as the builtin DFLASH answers them.
DFLASH_BEHAVIOUR = (
    "is_dflash",
    "is_dflash_family",
    "supports_target_verify_for_draft",
    "supports_prefill_shared_read_done",
    "supports_mixed_chunk",
    "supports_ragged_verify",
    "supports_grammar_overlap",
    "has_draft_kv",
    "carries_draft_hidden_states",
    "need_topk",
    "get_num_tokens_per_req_for_target_verify",
    "build_disagg_draft_input",
    "create_future_map",
)


def _as_dflash(name: str) -> Callable[..., Any]:
    """Return a method that calls SpeculativeAlgorithm.DFLASH's method `name`."""

    def method(self: CustomSpecAlgo, *args: Any, **kwargs: Any) -> Any:
        return getattr(SpeculativeAlgorithm.DFLASH, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Same answer as SpeculativeAlgorithm.DFLASH.{name}()."
    return method


class DDTreeSpecAlgo(CustomSpecAlgo):
    """DDTREE: DFlash-family, served by DDTreeWorkerV2 (a DFlash V2 worker)."""

    def is_ddtree(self) -> bool:
        return True

    def resolve_max_speculative_num_draft_tokens(self, server_args: ServerArgs) -> int | None:
        """The verify width: root + budget when wider than the DFlash block (else the block).

        The scheduler reserves this many KV slots per request and decode step, and sizes
        req_to_token rows and the KV pool's tail with it.
        """
        from sglang.srt.arg_groups.overrides import resolving_view

        cfg = resolving_view(server_args)
        block, budget = cfg.speculative_num_draft_tokens, cfg.speculative_ddtree_budget
        if block is None or budget is None:
            return block
        return max(int(block), int(budget) + 1)

    def create_worker(self, server_args: ServerArgs) -> type:
        """Return DDTreeWorkerV2; an out-of-tree platform's DFLASH worker verifies no tree."""
        if SpeculativeAlgorithm.DFLASH.get_platform_worker_cls() is not None:
            raise ValueError("DDTREE runs only on sglang's own DFlashWorkerV2 platforms")
        return _worker_factory(server_args)


for _name in DFLASH_BEHAVIOUR:
    setattr(DDTreeSpecAlgo, _name, _as_dflash(_name))


def _worker_factory(server_args: ServerArgs) -> type:
    from sglang.srt.speculative.ddtree_worker_v2 import DDTreeWorkerV2

    return DDTreeWorkerV2


if get_spec(DDTREE) is None:
    # The V2 worker drives both overlap and non-overlap scheduling, as for DFLASH.
    SpeculativeAlgorithm.register(DDTREE, supports_overlap=True, spec_class=DDTreeSpecAlgo)(
        _worker_factory
    )
