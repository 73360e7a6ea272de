"""DDTREE on sglang 0.5.23: DFlashWorkerV2 drafting a block, verifying a tree (ddtree 2.1.x, 2.2.x).

One decode step, everything else as DFLASH does it:
1. The DFlash draft runs its block (bonus token + mask tokens) unchanged.
2. ``_greedy_sample_from_vocab_parallel_head`` (DFLASH's top-1 per block position) is where
   this worker takes the draft's full logits for positions 1..B-1 instead, builds one DDTree
   per request under ``--speculative-ddtree-budget`` (``ddtree_utils``) and returns the tree's
   node tokens in the block's slots.
3. ``_verify_tree_layout`` gives the verify forward an ancestor-only mask and node positions
   ``prefix + depth`` (DFLASH: no mask, ``prefix + index``).
4. ``_accept_block`` walks the tree with the target's token at every node (argmax, or one
   lossless sample per node for non-greedy requests) and returns DFLASH's committed-block
   format: accepted tokens then the bonus, commit length = accepted + 1.
5. ``_commit_tree_path`` moves the accepted path's target KV, hidden states and logits to the
   front of each request's verify window, where DFLASH's chain code (draft-KV append, logprobs,
   next frontier) reads them.

Verify width ``W = max(block, budget + 1)``: DDTreeSpecAlgo declares it as the maximum draft
token count, so the scheduler reserves W KV slots per request and step (dflash_info_v2 reads
that maximum); the draft still writes only its block's columns of the W-wide window, and the
committed path (at most block - 1 deep) is what the draft KV receives. The tree is built on the
host (one device-to-host copy per step); sglang's own device builder (``uno_tree``) is the
planned replacement once proved equal on a GPU.

Greedy output is token-identical to the target's own greedy decoding (fp32; tested on a real
CPU server in the ddtree-deploy sandbox).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from sglang.kernels.ops.speculative.cache_locs import assign_extend_cache_locs_func
from sglang.srt.speculative.ddtree_checks import find_ddtree_v2_errors
from sglang.srt.speculative.ddtree_tp import VocabShard, build_ddtree_tree_sharded
from sglang.srt.speculative.ddtree_memory import find_ddtree_memory_error, plan_ddtree_step_memory
from sglang.srt.speculative.ddtree_utils import (
    build_ddtree_tree_from_logits,
    compile_ddtree_tree,
    follow_verified_trees_batched,
)
from sglang.srt.speculative.ddtree_worker_utils import (
    DDTreeVerifyBatch,
    build_ddtree_custom_mask,
    pack_ddtree_verify_batch,
    sample_ddtree_posterior,
)
from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
from sglang.srt.speculative.spec_utils import move_accept_tokens_to_target_kvcache

logger = logging.getLogger(__name__)



def hybrid_target_kind(model_config: Any) -> str | None:
    """Name the target's linear-attention/Mamba family as sglang sees it, None when it has
    none: sglang's own ``mambaish_config`` (Mamba2, GDN, KDA, Lightning and the registry's
    linear-attention models), so a family sglang adds is refused without a change here."""
    from sglang.srt.configs import hybrid_arch

    found = hybrid_arch.mambaish_config(model_config)
    if found is None:
        return None
    families = (
        ("GDN", hybrid_arch.hybrid_gdn_config),
        ("Mamba2", hybrid_arch.mamba2_config),
        ("KDA", hybrid_arch.hybrid_kda_config),
        ("Lightning", hybrid_arch.hybrid_lightning_config),
    )
    family = next((name for name, find in families if find(model_config) is not None), None)
    return f"{family or 'linear attention'} ({type(found).__name__})"


@dataclass
class DDTreeStep:
    """The trees of one decode step (set by the draft, read by verify and accept)."""

    layout: DDTreeVerifyBatch  # on the worker's device
    accept_index: torch.Tensor | None = None  # [B, depth + 1] local nodes, root first


class DDTreeWorkerV2(DFlashWorkerV2):
    """DFlashWorkerV2 whose verify step checks a DDTree instead of the block's chain."""

    def __init__(self, server_args: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(server_args, *args, **kwargs)
        self.ddtree_budget = int(server_args.speculative_ddtree_budget)
        errors = find_ddtree_v2_errors(
            budget=self.ddtree_budget,
            block_size=int(self.block_size),
            tp_size=int(server_args.tp_size),
            dp_attention=bool(server_args.enable_dp_attention),
            dp_lm_head=bool(server_args.enable_dp_lm_head),
            page_size=int(self.page_size),
            grammar_backend=server_args.grammar_backend,
            attention_backend=server_args.attention_backend,
            device=str(server_args.device),
            cuda_graphs=not server_args.disable_cuda_graph,
            compact_draft_cache=bool(self.use_compact_draft_cache),
            uses_selector=self.selector is not None,
            uses_lilicorr=self.lilicorr is not None,
            uses_domino=bool(self._is_domino),
            hybrid_target=hybrid_target_kind(self.model_runner.model_config),
            radix_cache=not bool(getattr(server_args, "disable_radix_cache", False)),
            replayssm=bool(getattr(server_args, "enable_linear_replayssm_spec", False)),
        )
        if errors:
            raise ValueError("DDTREE cannot start: " + "; ".join(errors))
        self._ddtree: DDTreeStep | None = None
        # Local slot of each request's last accepted node (the root when none), set when a
        # step's path is committed: the hybrid target keeps that slot's recurrent state.
        self._ddtree_last_nodes: torch.Tensor | None = None
        logger.info(
            "DDTREE: draft block %d, tree budget %d, verify width %d (DFlashWorkerV2, "
            "overlap scheduling %s)",
            int(self.block_size),
            self.ddtree_budget,
            self.verify_width,
            "off" if server_args.disable_overlap_schedule else "on",
        )

    def alloc_memory_pool(self, *args: Any, **kwargs: Any) -> Any:
        """Allocate DFLASH's draft pools, then size the verify workspace at width W.

        Here, not in __init__: sglang resolves --max-running-requests with the target's
        pools, which the scheduler allocates after it built this worker (in __init__
        server_args.max_running_requests is still None when the flag was not given).
        Raises ValueError on CUDA when W x requests of float32 logits, LM-head output and
        sampling need more than half the memory outside --mem-fraction-static (the
        message names the budget, request count and fraction that fit).
        """
        result = super().alloc_memory_pool(*args, **kwargs)
        self._check_verify_workspace(self.model_runner.max_running_requests)
        return result

    def _check_verify_workspace(self, max_requests: int | None) -> None:
        """Log the verify workspace at `max_requests`; refuse it on CUDA when too large."""
        if max_requests is None:
            logger.warning("DDTREE: max running requests unknown, verify workspace not sized")
            return
        config = self.model_runner.model_config
        sizes = {
            "budget": self.ddtree_budget,
            "block_size": int(self.block_size),
            "max_requests": int(max_requests),
            "vocab_size": int(config.vocab_size),
            "dtype_bytes": int(config.dtype.itemsize),
        }
        step = plan_ddtree_step_memory(**sizes)
        on_cuda = torch.device(self.device).type == "cuda"
        logger.info(
            "DDTREE: verify workspace at %d requests x width %d: %.2f GiB (float32 logits "
            "%.2f, LM head output %.2f, sampling %.2f)%s",
            int(max_requests),
            step.verify_width,
            step.workspace_bytes / (1 << 30),
            step.logits_bytes / (1 << 30),
            step.lm_head_out_bytes / (1 << 30),
            step.sampling_bytes / (1 << 30),
            "" if on_cuda else " (capped on CUDA only)",
        )
        if not on_cuda:
            return
        error = find_ddtree_memory_error(
            **sizes,
            device_bytes=torch.cuda.get_device_properties(self.device).total_memory,
            mem_fraction_static=float(self.server_args.mem_fraction_static),
        )
        if error is not None:
            raise ValueError("DDTREE cannot start: " + error)

    @property
    def verify_width(self) -> int:
        """Verify slots per request: the root + the budget, at least the draft block."""
        return max(int(self.block_size), self.ddtree_budget + 1)

    def _verify_window_locs(
        self, batch: Any, prefix_lens: torch.Tensor, block_locs_2d: torch.Tensor
    ) -> torch.Tensor:
        """The verify window's KV slots: the block's, or ``verify_width`` from the prefix on.

        The scheduler reserved them (DDTreeSpecAlgo declares the width as the maximum draft
        token count), so they are the request's next ``req_to_token`` entries.
        """
        width = self.verify_width
        if width == int(self.block_size):
            return block_locs_2d.reshape(-1)
        return assign_extend_cache_locs_func(
            req_pool_indices=batch.req_pool_indices,
            req_to_token=self.model_runner.req_to_token_pool.req_to_token,
            start_offset=prefix_lens,
            end_offset=prefix_lens + width,
            batch_size=int(prefix_lens.shape[0]),
            draft_token_num=width,
            device=self.device,
        )

    def _maybe_build_draft_sampler(self) -> None:
        """No fused in-graph draft sampler: the tree needs the full draft logits."""
        return None

    def _greedy_sample_from_vocab_parallel_head(
        self, *, hidden_states: torch.Tensor, lm_head: Any, chunk_size: int = 256
    ) -> torch.Tensor:
        """Build this step's trees from the draft's full logits; return their node tokens.

        hidden_states: [B * (block - 1), H], the draft's rows for block positions 1..B-1.
        Returns [B * (block - 1)] tokens, the first block - 1 nodes of each tree (DFLASH's
        draft-token shape); the verify reads the whole tree from ``_verify_tree_layout``.
        """
        block = int(self.block_size)
        width = self.verify_width
        batch = hidden_states.shape[0] // (block - 1)
        if batch == 0:
            self._ddtree = None
            return torch.empty((0,), dtype=torch.long, device=hidden_states.device)
        weight = lm_head.weight
        shard = getattr(lm_head, "shard_indices", None)
        if shard is not None:
            weight = weight[: int(shard.num_org_elements)]
        draft_hidden = hidden_states.view(batch, block - 1, -1).to(weight.dtype)
        roots = self._draft_block_ids_buf[:batch, 0].tolist()
        # One request's [block - 1, V] float32 logits at a time, on the worker's device: the
        # builder sorts them there and copies only the top-budget log-probs, their ids and
        # the normaliser to the host (one small transfer per request). A batch-sized
        # [B, block - 1, V] tensor would be B x 8.7 MiB (block 16, V = 151936), and a host copy
        # of it would stall every step.
        # Under TP the head is vocab-parallel: each rank has its shard's logits, and
        # build_ddtree_tree_sharded gathers every shard's top-k over the head's own group
        # (one all-gather per request), so all ranks build the same tree, the one a single
        # rank builds from the full logits.
        tp_group = getattr(lm_head, "tp_group", None)
        sharded = tp_group is not None and int(lm_head.tp_size) > 1
        vocab = VocabShard.from_lm_head(lm_head) if sharded else None

        def tree_of(b: int) -> Any:
            logits = torch.matmul(draft_hidden[b], weight.T)
            if vocab is None:
                return build_ddtree_tree_from_logits(logits.float(), self.ddtree_budget)
            return build_ddtree_tree_sharded(
                logits, vocab, self.ddtree_budget, tp_group.device_group
            )

        trees = [compile_ddtree_tree(tree_of(b), roots[b], 0) for b in range(batch)]
        layout = pack_ddtree_verify_batch(trees, width).to(hidden_states.device)
        self._ddtree = DDTreeStep(layout=layout)
        return layout.input_ids.view(batch, width)[:, 1:block].reshape(-1)

    def _verify_tree_layout(
        self, prefix_lens: torch.Tensor, positions: torch.Tensor, draft_tokens: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """Return the verify forward's allow-mask, positions (prefix + depth) and node tokens."""
        step = self._ddtree
        if step is None:
            return super()._verify_tree_layout(prefix_lens, positions, draft_tokens)
        width = step.layout.width
        depths = step.layout.positions.view(-1, width)  # packed with root position 0
        verify_positions = (prefix_lens.to(depths.dtype)[:, None] + depths).reshape(-1)
        mask = build_ddtree_custom_mask(step.layout.tree_mask, prefix_lens.tolist())
        return mask, verify_positions.to(positions.dtype), step.layout.input_ids

    def _accept_block(
        self,
        *,
        candidates: torch.Tensor,
        next_token_logits: torch.Tensor,
        sampling_info: Any,
        draft_input: Any,
        prefix_lens: torch.Tensor,
        bs: int,
        target_predict: torch.Tensor | None = None,
    ):
        """Walk each tree with the target's token per node; return DFLASH's commit format."""
        step = self._ddtree
        if step is None:
            return super()._accept_block(
                candidates=candidates,
                next_token_logits=next_token_logits,
                sampling_info=sampling_info,
                draft_input=draft_input,
                prefix_lens=prefix_lens,
                bs=bs,
                target_predict=target_predict,
            )
        layout = step.layout
        width = layout.width
        if target_predict is not None:
            posterior = target_predict.view(bs, width)
        elif sampling_info is None or sampling_info.is_all_greedy:
            posterior = torch.argmax(next_token_logits, dim=-1).view(bs, width)
        else:
            posterior = sample_ddtree_posterior(
                next_token_logits,
                width,
                sampling_info.temperatures.view(-1),
                sampling_info.top_ks.view(-1),
                sampling_info.top_ps.view(-1),
                sampling_info.min_ps.view(-1),
            )
        accept_index, accept_len, bonus = follow_verified_trees_batched(
            layout.next_token,
            layout.next_sibling,
            layout.walk_tokens,
            posterior.to(torch.long),
            max_depth=width - 1,
        )
        step.accept_index = accept_index
        path_tokens = torch.gather(layout.walk_tokens, 1, accept_index.clamp(min=0))
        out_tokens = torch.zeros((bs, width), dtype=torch.int64, device=candidates.device)
        out_tokens[:, : width - 1] = path_tokens[:, 1:width]
        out_tokens.scatter_(1, accept_len[:, None], bonus[:, None])
        return accept_len, (accept_len + 1).to(torch.int32), bonus, out_tokens, None

    def _verify_tree_links(self, verify_input: Any) -> None:
        """Give the verify input this step's first-child/next-sibling links (EAGLE's layout:
        local slots, -1 for none), so a hybrid target's conv and GDN verify walk each node's
        tree parents instead of scanning the W slots as a chain."""
        step = self._ddtree
        if step is None:
            return
        verify_input.retrieve_next_token = step.layout.next_token
        verify_input.retrieve_next_sibling = step.layout.next_sibling

    def _mamba_commit_steps(self, commit_lens: torch.Tensor) -> torch.Tensor:
        """The verify slot whose recurrent state each request keeps: its last accepted node
        (a chain position ``commit_len - 1`` is another node's state in a tree)."""
        last, self._ddtree_last_nodes = self._ddtree_last_nodes, None
        if last is None:
            return super()._mamba_commit_steps(commit_lens)
        return last.to(torch.int64)

    def _commit_tree_path(self, batch: Any, logits_output: Any, bs: int) -> None:
        """Move the accepted path's KV, hidden states and logits to the window's front."""
        step, self._ddtree = self._ddtree, None
        if step is None or step.accept_index is None:
            return
        width = step.layout.width
        local = step.accept_index
        base = torch.arange(bs, device=local.device)[:, None] * width
        global_index = torch.where(local >= 0, local + base, torch.full_like(local, -1))
        accepted = (local[:, 1:] >= 0).sum(dim=1)
        self._ddtree_last_nodes = local.gather(1, accepted[:, None].to(torch.int64))[:, 0]
        move_accept_tokens_to_target_kvcache(
            batch, global_index, accepted, self.model_runner.token_to_kv_pool_allocator
        )
        rows = torch.arange(bs * width, device=local.device).view(bs, width)
        depth_slots = local.shape[1]
        rows[:, :depth_slots] = torch.where(local >= 0, global_index, rows[:, :depth_slots])
        order = rows.reshape(-1)
        for name in ("hidden_states", "next_token_logits"):
            value = getattr(logits_output, name, None)
            if value is not None:
                setattr(logits_output, name, value[order])
