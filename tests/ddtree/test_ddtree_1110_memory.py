"""ddtree 1.1.10's step memory (ddtree_memory.py) and chunked sampling, on the CPU.

The verify width covers the draft block (the slots sglang reserves per request per step),
the byte counts follow the tensors' shapes, and the start-up cap refuses a workspace that
does not fit while every remedy its message names does fit (the negative controls).
"""

from __future__ import annotations

import pytest
import torch

from tests.support import REPO, load_module, patchset_file

DDTREE_1110 = REPO / "patchsets/ddtree/1.1.10"
PAYLOAD = "sglang/srt/speculative"
mem = load_module(
    "_payload1110_ddtree_memory", patchset_file(DDTREE_1110, f"{PAYLOAD}/ddtree_memory.py")
)
wu = load_module(
    "_payload1110_ddtree_worker_utils",
    patchset_file(DDTREE_1110, f"{PAYLOAD}/ddtree_worker_utils.py"),
)

QWEN_VOCAB = 151936  # Qwen3's vocabulary (DFlash drafts share the target's)
H200_BYTES = 143771 * (1 << 20)  # what sglang reads for an H200 (MiB from nvidia-smi)


@pytest.mark.parametrize(
    ("budget", "block", "width"), [(1, 16, 16), (8, 16, 16), (14, 16, 16), (15, 16, 16),
                                   (16, 16, 17), (1024, 16, 1025), (3, 4, 4), (8, 4, 9)],
)  # fmt: skip
def test_verify_width_covers_the_draft_block(budget: int, block: int, width: int):
    step = mem.plan_ddtree_step_memory(
        budget=budget, block_size=block, max_requests=3, vocab_size=7, dtype_bytes=2
    )
    assert mem.resolve_ddtree_verify_width(budget, block) == width == step.verify_width
    # What the scheduler reserves per request per step covers both writers of the step.
    assert step.kv_slots_reserved >= step.draft_block_slots == block
    assert step.kv_slots_reserved >= budget + 1


@pytest.mark.parametrize(("budget", "block"), [(0, 16), (8, 0)])
def test_verify_width_refuses_empty_trees_and_blocks(budget: int, block: int):
    with pytest.raises(ValueError, match=">= 1"):
        mem.resolve_ddtree_verify_width(budget, block)


def test_byte_counts_follow_the_shapes():
    step = mem.plan_ddtree_step_memory(
        budget=64, block_size=16, max_requests=48, vocab_size=QWEN_VOCAB, dtype_bytes=2
    )
    rows = 48 * 65
    assert step.verify_rows == rows
    assert step.logits_bytes == rows * QWEN_VOCAB * 4
    assert step.lm_head_out_bytes == rows * QWEN_VOCAB * 2
    assert step.sampling_bytes == wu.SAMPLING_CHUNK_ROWS * QWEN_VOCAB * 40
    assert step.workspace_bytes == (
        step.logits_bytes + step.lm_head_out_bytes + step.sampling_bytes
    )
    small = mem.plan_ddtree_step_memory(
        budget=1, block_size=2, max_requests=1, vocab_size=10, dtype_bytes=4
    )
    assert small.sampling_bytes == 2 * 10 * 40  # fewer rows than one chunk


def test_both_files_chunk_sampling_alike():
    assert mem.SAMPLING_CHUNK_ROWS == wu.SAMPLING_CHUNK_ROWS


def qwen_error(budget: int, requests: int = 48, fraction: float = 0.9) -> str | None:
    return mem.find_ddtree_memory_error(
        budget=budget,
        block_size=16,
        max_requests=requests,
        vocab_size=QWEN_VOCAB,
        dtype_bytes=2,
        device_bytes=H200_BYTES,
        mem_fraction_static=fraction,
    )


def test_cap_refuses_a_large_budget_and_every_named_remedy_fits():
    error = qwen_error(1024)
    assert error is not None
    assert error.startswith("DDTREE verify workspace 42.50 GiB (budget 1024, verify width 1025")
    assert "exceeds 50% of the memory outside --mem-fraction-static 0.9" in error
    budget = int(error.split("--speculative-ddtree-budget <= ")[1].split()[0])
    requests = int(error.split("--max-running-requests <= ")[1].split()[0])
    fraction = float(error.split("--mem-fraction-static <= ")[1].rstrip("."))
    assert qwen_error(budget) is None and qwen_error(budget + 1) is not None
    assert qwen_error(1024, requests) is None and qwen_error(1024, requests + 1) is not None
    assert qwen_error(1024, fraction=fraction) is None
    assert qwen_error(1024, fraction=fraction + 0.002) is not None


def test_cap_stays_silent_on_a_budget_that_fits():
    assert qwen_error(16) is None and qwen_error(64) is None


def test_cap_names_no_budget_below_the_block():
    error = mem.find_ddtree_memory_error(
        budget=8, block_size=16, max_requests=10_000, vocab_size=QWEN_VOCAB, dtype_bytes=2,
        device_bytes=H200_BYTES, mem_fraction_static=0.9,
    )  # fmt: skip
    assert error is not None and "--speculative-ddtree-budget" not in error
    assert "--max-running-requests <= " in error


def sample(logits, width, top_k, top_p, chunk_rows, seed=0):
    batch = logits.shape[0] // width
    gen = torch.Generator().manual_seed(seed)
    return wu.sample_ddtree_posterior(
        logits, width, torch.full((batch,), 0.7), torch.full((batch,), top_k),
        torch.full((batch,), top_p), torch.zeros(batch), generator=gen, chunk_rows=chunk_rows,
    )  # fmt: skip


def test_chunked_sampling_keeps_each_rows_filter():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(5 * 7, 50, generator=gen) * 4
    # top-k 1 is deterministic: every chunking gives each row's argmax.
    for chunk_rows in (1, 3, 128):
        tokens = sample(logits, 7, top_k=1, top_p=1.0, chunk_rows=chunk_rows)
        assert torch.equal(tokens.view(-1), logits.argmax(-1))
    # top-p: every sample lies in its row's nucleus, whatever the chunking.
    order = logits.float().div(0.7).softmax(-1).sort(-1, descending=True)
    before = order.values.cumsum(-1) - order.values
    for chunk_rows in (1, 4, 128):
        tokens = sample(logits, 7, top_k=0, top_p=0.5, chunk_rows=chunk_rows, seed=chunk_rows)
        for row, token in enumerate(tokens.view(-1).tolist()):
            nucleus = order.indices[row][before[row] < 0.5].tolist()
            assert token in nucleus


def test_chunked_sampling_of_an_empty_batch():
    tokens = sample(torch.empty(0, 9), 3, top_k=0, top_p=0.9, chunk_rows=4)
    assert tokens.shape == (0, 3)
