"""DDTree's KV slots and vocabulary-wide workspace per decode step, and the start-up cap.

Pure arithmetic (stdlib only), called once by ServerArgs._handle_ddtree when
--speculative-algorithm DDTREE is resolved, so a server that cannot hold its own
step refuses to start instead of failing mid-flight.

KV slots. Per request and decode step the DFlash draft writes one block of
`block_size` slots (allocated, then handed back before the verify) and the verify
writes `width` slots. sglang's scheduler reserves, per running request and step,
`speculative_num_draft_tokens` slots (ScheduleBatch.new_tokens_required_next_decode,
topk = steps = 1 for DFLASH-family) and sizes each req_to_token row with 4 + that
many slots of headroom. ddtree 1.1.0 set it to budget + 1, so a budget below
block_size - 1 let the draft allocate more than was reserved ("DFLASH draft OOM")
and write past the row near the context limit. ddtree 1.1.10 makes the verify width
max(budget + 1, block_size): every reservation covers the draft block, and smaller
trees are padded to it (padding slots are freed after the verify).

Workspace. The verify forward's logits are [rows, V] with rows = requests * width:
the LM head's output in the model dtype, copied by sglang into float32
(LogitsProcessor; a CUDA graph keeps that float32 buffer for its largest batch).
Non-greedy sampling works on SAMPLING_CHUNK_ROWS rows at a time (sort path: about
SAMPLING_BYTES_PER_ELEMENT bytes per logit). None of it is in sglang's static memory
budget (weights + KV pool = mem_fraction_static); it must fit in the rest, which
sglang also uses for activations and CUDA graphs. The cap: at most
WORKSPACE_SHARE_OF_FREE of that rest.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DDTreeStepMemory",
    "LOGITS_FP32_BYTES",
    "SAMPLING_BYTES_PER_ELEMENT",
    "SAMPLING_CHUNK_ROWS",
    "WORKSPACE_SHARE_OF_FREE",
    "find_ddtree_memory_error",
    "plan_ddtree_step_memory",
    "resolve_ddtree_verify_width",
]

LOGITS_FP32_BYTES = 4
# Sort path of sample_ddtree_posterior per logit: scaled copy 4, sorted values 4 and
# int64 ids 8, the sort's scratch (index input 8, double buffers 12), then softmax,
# cumsum and mask temporaries; counted from the code, rounded up.
SAMPLING_BYTES_PER_ELEMENT = 40
# Rows (request, node) that one pass of non-greedy sampling holds at once.
SAMPLING_CHUNK_ROWS = 128
# Share of the memory outside mem_fraction_static that DDTree's workspace may take.
WORKSPACE_SHARE_OF_FREE = 0.5


def resolve_ddtree_verify_width(budget: int, block_size: int) -> int:
    """Return the verify slots per request: max(budget + 1, block_size).

    budget: tree nodes per step, root excluded (>= 1). block_size: the DFlash draft
    block. The width is what sglang reserves per request per step, so it must cover
    the draft block as well as the tree.
    """
    if budget < 1 or block_size < 1:
        raise ValueError(f"budget and block size must be >= 1, got {budget}, {block_size}")
    return max(budget + 1, block_size)


@dataclass(frozen=True)
class DDTreeStepMemory:
    """One decode step's sizes at the largest batch; *_bytes are bytes.

    verify_width: slots per request; kv_slots_reserved: per request per step (the same);
    draft_block_slots: per request per step, handed back before the verify;
    verify_rows: requests * verify_width; logits_bytes: float32 verify logits;
    lm_head_out_bytes: the LM head output in the model dtype (alive with the copy);
    sampling_bytes: one chunk of non-greedy sampling; workspace_bytes: their sum.
    """

    verify_width: int
    kv_slots_reserved: int
    draft_block_slots: int
    verify_rows: int
    logits_bytes: int
    lm_head_out_bytes: int
    sampling_bytes: int
    workspace_bytes: int


def plan_ddtree_step_memory(
    *, budget: int, block_size: int, max_requests: int, vocab_size: int, dtype_bytes: int
) -> DDTreeStepMemory:
    """Return the step sizes of `max_requests` requests of vocabulary `vocab_size`.

    dtype_bytes: bytes of one element of the target's LM head output (bf16: 2).
    """
    width = resolve_ddtree_verify_width(budget, block_size)
    rows = max_requests * width
    logits = rows * vocab_size * LOGITS_FP32_BYTES
    head_out = rows * vocab_size * dtype_bytes
    sampling = min(rows, SAMPLING_CHUNK_ROWS) * vocab_size * SAMPLING_BYTES_PER_ELEMENT
    return DDTreeStepMemory(
        verify_width=width,
        kv_slots_reserved=width,
        draft_block_slots=block_size,
        verify_rows=rows,
        logits_bytes=logits,
        lm_head_out_bytes=head_out,
        sampling_bytes=sampling,
        workspace_bytes=logits + head_out + sampling,
    )


def find_ddtree_memory_error(
    *,
    budget: int,
    block_size: int,
    max_requests: int,
    vocab_size: int,
    dtype_bytes: int,
    device_bytes: int,
    mem_fraction_static: float,
) -> str | None:
    """Return why this DDTREE server's step workspace does not fit, or None when it fits.

    device_bytes: the device's memory; mem_fraction_static: sglang's static share of it
    (weights + KV pool). The workspace may take WORKSPACE_SHARE_OF_FREE of the rest.
    The message names the largest budget and --max-running-requests that fit, and the
    --mem-fraction-static that would hold this configuration.
    """
    step = plan_ddtree_step_memory(
        budget=budget,
        block_size=block_size,
        max_requests=max_requests,
        vocab_size=vocab_size,
        dtype_bytes=dtype_bytes,
    )
    allowed = int(device_bytes * (1.0 - mem_fraction_static) * WORKSPACE_SHARE_OF_FREE)
    if step.workspace_bytes <= allowed:
        return None
    row_bytes = vocab_size * (LOGITS_FP32_BYTES + dtype_bytes)
    room = max(allowed - step.sampling_bytes, 0)
    max_width = room // (max_requests * row_bytes)
    max_reqs = room // (step.verify_width * row_bytes)
    fraction = 1.0 - step.workspace_bytes / WORKSPACE_SHARE_OF_FREE / device_bytes
    fixes = []
    if max_width >= max(block_size, 2):
        fixes.append(f"--speculative-ddtree-budget <= {max_width - 1}")
    if max_reqs >= 1:
        fixes.append(f"--max-running-requests <= {max_reqs}")
    if fraction > 0:
        fixes.append(f"--mem-fraction-static <= {int(fraction * 1000) / 1000:.3f}")
    return (
        f"DDTREE verify workspace {_gib(step.workspace_bytes)} (budget {budget}, verify "
        f"width {step.verify_width}, {max_requests} requests x {vocab_size} vocab: float32 "
        f"logits {_gib(step.logits_bytes)}, LM head output {_gib(step.lm_head_out_bytes)}, "
        f"sampling {_gib(step.sampling_bytes)}) exceeds {WORKSPACE_SHARE_OF_FREE:.0%} of the "
        f"memory outside --mem-fraction-static {mem_fraction_static} "
        f"({_gib(allowed)} of {_gib(device_bytes)}). Set "
        + (" or ".join(fixes) if fixes else "a smaller budget and batch")
        + "."
    )


def _gib(size_bytes: int) -> str:
    """Return `size_bytes` as GiB with two decimals."""
    return f"{size_bytes / (1 << 30):.2f} GiB"
