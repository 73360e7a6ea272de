"""DDTree verify inside the DFlash worker: sglang glue around ddtree_worker_utils.

The DFlash worker calls three things when --speculative-algorithm DDTREE is set:
- `check_ddtree_worker(worker)` once at start: states the restrictions and refuses
  unsupported combinations with one ValueError listing every problem.
- `prepare_ddtree_verify(...)` after the draft block: builds one DDTree per
  request from the draft logits and returns a DDTreeVerifyInput whose verify
  forward carries the trees (ids, depth positions, ancestor-only custom mask).
- `DDTreeVerifyInput.verify(...)` (called like DFlashVerifyInput.verify): walks the
  trees with the target's tokens, commits the accepted path plus bonus, remaps the
  KV cache to the accepted nodes and returns their hidden states for the draft.
Decisions are made by torch functions in ddtree_worker_utils, tested on the CPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from sglang.srt.layers.logits_processor import LogitsProcessorOutput
from sglang.srt.layers.sampler import apply_custom_logit_processor
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.speculative.ddtree_utils import (
    build_ddtree_tree_from_logits,
    compile_ddtree_tree,
    follow_verified_trees_batched,
)
from sglang.srt.speculative.ddtree_worker_utils import (
    DDTreeVerifyBatch,
    build_ddtree_custom_mask,
    collect_accepted_tokens,
    compute_draft_logits,
    find_ddtree_restriction_errors,
    pack_ddtree_verify_batch,
    sample_ddtree_posterior,
    select_accepted_rows,
    split_ddtree_kv_slots,
)
from sglang.srt.speculative.dflash_info import DFlashVerifyInput
from sglang.srt.speculative.dflash_utils import resolve_dflash_verify_mask_policy
from sglang.srt.speculative.spec_info import SpecInputType
from sglang.srt.speculative.spec_utils import assign_req_to_token_pool_func

logger = logging.getLogger(__name__)

__all__ = ["DDTreeVerifyInput", "check_ddtree_worker", "prepare_ddtree_verify"]


def _lm_head_base_weight(lm_head: Any) -> tuple[torch.Tensor, bool]:
    """Return (base-vocab weight [V, H], whether the head is sharded or has added vocab)."""
    shard = lm_head.shard_indices
    odd = int(shard.num_added_elements) != 0 or int(shard.org_vocab_start_index) != 0
    return lm_head.weight[: int(shard.num_org_elements)], odd


def check_ddtree_worker(worker: Any) -> None:
    """Log DDTree's restrictions; raise ValueError listing every unsupported setting.

    worker: the DFlashWorker after its __init__ (server_args, page_size, target runner).
    """
    args = worker.server_args
    runner = worker.target_worker.model_runner
    backend_name, _ = resolve_dflash_verify_mask_policy(runner.attn_backend)
    lm_head = getattr(runner.model, "lm_head", None)
    odd_head = lm_head is None or not hasattr(lm_head, "shard_indices")
    if not odd_head:
        odd_head = _lm_head_base_weight(lm_head)[1]
    errors = find_ddtree_restriction_errors(
        page_size=int(worker.page_size),
        tp_size=int(args.tp_size),
        attention_backend=backend_name,
        cuda_graph=not args.disable_cuda_graph,
        hybrid_mamba=hasattr(runner.attn_backend, "update_mamba_state_after_mtp_verify"),
        lm_head_sharded_or_extended=odd_head,
    )
    if errors:
        raise ValueError("DDTREE cannot run with these settings:\n- " + "\n- ".join(errors))
    if worker.tp_rank == 0:
        logger.info(
            "DDTREE enabled: budget=%d, verify width=%d = max(budget + 1, block) (KV slots "
            "reserved per request per step; CUDA graphs capture this width), "
            "draft block=%d, attention=%s. Restrictions: page size 1, tp 1, no overlap "
            "scheduling, no hybrid Mamba targets, no grammar/logprobs (as DFLASH).",
            args.speculative_ddtree_budget,
            worker.ddtree_verify_width,
            worker.block_size,
            backend_name,
        )


def prepare_ddtree_verify(
    *,
    batch: ScheduleBatch,
    draft_hidden: torch.Tensor,
    lm_head: Any,
    root_tokens: torch.Tensor,
    budget: int,
    width: int,
    page_size: int,
) -> DDTreeVerifyInput:
    """Return the prepared verify input holding one DDTree per request.

    draft_hidden: [B, block_size, H] from the DFlash draft pass (row 0 = root).
    root_tokens: [B] committed bonus tokens. width: verify slots per request,
    max(budget + 1, block_size) (ddtree_memory). Allocates the verify KV slots.
    """
    weight, _ = _lm_head_base_weight(lm_head)
    logits = compute_draft_logits(draft_hidden, weight)
    prefix_lens = batch.seq_lens_cpu.tolist()
    roots = root_tokens.tolist()
    compiled = [
        compile_ddtree_tree(build_ddtree_tree_from_logits(logits[b], budget), roots[b], prefix)
        for b, prefix in enumerate(prefix_lens)
    ]
    tree = pack_ddtree_verify_batch(compiled, width).to(batch.device)
    verify_input = DDTreeVerifyInput(
        draft_token=tree.input_ids,
        positions=tree.positions,
        draft_token_num=tree.width,
        tree=tree,
    )
    verify_input.prepare_for_verify(batch, page_size)
    return verify_input


@dataclass
class DDTreeVerifyInput(DFlashVerifyInput):
    """A DFlash verify input whose block is a padded DDTree per request."""

    tree: DDTreeVerifyBatch | None = None

    def __post_init__(self):
        super().__post_init__()
        self.spec_input_type = SpecInputType.DDTREE_VERIFY

    def prepare_for_verify(self, batch: ScheduleBatch, page_size: int, **_: Any):
        """Allocate width slots per request and set the ancestor-only custom mask."""
        if batch.forward_mode.is_idle():
            return
        super().prepare_for_verify(batch, page_size, build_custom_mask=False)
        self.custom_mask = build_ddtree_custom_mask(
            self.tree.tree_mask, batch.seq_lens_cpu.tolist()
        )

    def _target_tokens(self, batch: ScheduleBatch, logits: torch.Tensor) -> torch.Tensor:
        """Return the target's token at every node [B, width]: argmax or per-node samples."""
        info = batch.sampling_info
        width = self.tree.width
        if info is not None:
            if info.has_custom_logit_processor:
                apply_custom_logit_processor(logits, info, num_tokens_in_batch=width)
            if info.penalizer_orchestrator.is_required or info.logit_bias is not None:
                bias = torch.zeros(
                    (len(info), logits.shape[1]), dtype=torch.float32, device=logits.device
                )
                info.apply_logits_bias(bias)
                # Broadcast over the width: no [B * width, V] copy of the bias.
                logits.view(-1, width, logits.shape[1]).add_(bias[:, None, :])
        if info is None or info.is_all_greedy:
            return torch.argmax(logits, dim=-1).view(-1, width)
        min_ps = info.min_ps if info.need_min_p_sampling else torch.zeros_like(info.top_ps)
        return sample_ddtree_posterior(
            logits, width, info.temperatures.view(-1), info.top_ks, info.top_ps, min_ps
        )

    def verify(
        self,
        *,
        batch: ScheduleBatch,
        logits_output: LogitsProcessorOutput,
        page_size: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """Walk, commit and compact; return what DFlashVerifyInput.verify returns.

        (new_bonus_tokens int64 [B], commit_lens int32 [B], hidden states of the
        committed nodes [sum(commit_lens), F], accepted draft tokens per request).
        """
        device = batch.device
        if batch.forward_mode.is_idle():
            empty = torch.empty((0,), dtype=torch.int64, device=device)
            return empty, empty.to(torch.int32), empty, []
        if page_size != 1:
            raise RuntimeError(f"DDTREE verify needs page_size 1, got {page_size}.")
        tree = self.tree
        posterior = self._target_tokens(batch, logits_output.next_token_logits)
        accept_index, accept_length, bonus = follow_verified_trees_batched(
            tree.next_token, tree.next_sibling, tree.walk_tokens, posterior, tree.max_depth
        )
        proposed = collect_accepted_tokens(tree.walk_tokens, accept_index, accept_length, bonus)

        commit_lens_cpu, new_bonus, num_correct = [], [], []
        for req, tokens in zip(batch.reqs, proposed, strict=True):
            appended = 0
            for token_id in tokens:
                req.output_ids.append(token_id)
                appended += 1
                req.update_finish_state()
                if req.finished():
                    break
            new_bonus.append(int(req.output_ids[-1]))
            commit_lens_cpu.append(appended)
            num_correct.append(appended - 1)
            req.spec_verify_ct += 1
            req.spec_num_correct_drafts += appended - 1
            req.kv_committed_len += appended
            req.kv_allocated_len = req.kv_committed_len

        commit_lens = torch.tensor(commit_lens_cpu, dtype=torch.int32, device=device)
        rows = select_accepted_rows(accept_index, commit_lens, tree.width)
        keep_loc, free_loc = split_ddtree_kv_slots(batch.out_cache_loc, rows)
        batch.token_to_kv_pool_allocator.free(free_loc)
        batch.out_cache_loc = keep_loc
        assign_req_to_token_pool_func(
            batch.req_pool_indices,
            batch.req_to_token_pool.req_to_token,
            batch.seq_lens,
            batch.seq_lens + commit_lens.to(batch.seq_lens.dtype),
            keep_loc,
            len(commit_lens_cpu),
        )
        batch.seq_lens.add_(commit_lens.to(batch.seq_lens.dtype))
        batch.seq_lens_cpu.add_(torch.tensor(commit_lens_cpu, dtype=batch.seq_lens_cpu.dtype))
        batch.seq_lens_sum += sum(commit_lens_cpu)

        hidden = logits_output.hidden_states
        if hidden is None:
            raise RuntimeError("DDTREE verify requires target hidden states, but got None.")
        next_target_hidden = hidden.index_select(0, rows)
        logits_output.hidden_states = None
        new_bonus_tokens = torch.tensor(new_bonus, dtype=torch.int64, device=device)
        return new_bonus_tokens, commit_lens, next_target_hidden, num_correct
