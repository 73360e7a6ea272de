"""In-memory CPU adaptation of sglang 0.5.23 (DFlashWorkerV2, overlap scheduler): a TEST FIXTURE.

The companion of ``cpu_adapt`` (which holds the import hook and the 0.5.13.post1 adapters):
``cpu_adapt`` activates the ``PATCHES`` of this module when the installed sglang is 0.5.23.
Installed next to it on the host as ``ddtree_sandbox_cpu_adapt_0523``. Never shipped to real
hosts; no installed file is changed (the integrity suite's RECORD hashes still hold).

Blockers met on a CPU-only machine, in order, each fixed by one ``adapt_*`` function:

1. With ``SGLANG_USE_CPU_ENGINE=1`` five kernel modules import ``*_cpu`` ops from sgl_kernel's
   CPU build at module level (not on PyPI). ``sgl_kernel`` stays absent for everyone else:
   while one of those modules runs, a stand-in module holding torch bodies of exactly those
   ops sits in ``sys.modules`` (``_with_cpu_ops``). An op with no torch body here raises
   ``NotImplementedError`` naming itself when called, never silently does nothing.
2. ``speculative_hook`` refuses the ``cpu`` device for speculative decoding.
3. ``DFlashWorkerV2`` allows only GPU draft backends and falls back to flashinfer.
4. ``dflash_worker_v2`` calls ``Tensor.record_stream`` on CPU tensors (CUDA-only).
5. ``ModelRunner.forward_extend`` casts ``input_embeds`` to bfloat16 (as in 0.5.13.post1).
6. ``MHATokenToKVPool`` warms up a Triton KV copy when speculating (as in 0.5.13.post1: skipped
   on CPU, where ``SGLANG_NATIVE_MOVE_KV_CACHE=1`` selects sglang's own torch move).
7. torch_native's TARGET_VERIFY lacks extend lengths and ignores the tree mask (as in
   0.5.13.post1; the same masked-SDPA body serves both).

EAGLE's tree ops (``build_tree_kernel_efficient_cpu``, ``verify_tree_greedy_cpu``) get no torch
body: ddtree 2.1.0 builds, masks and walks its trees with its own code, and a CPU run of EAGLE
trees must fail loudly rather than verify nothing (tests/kernels proves sglang's Triton tree
kernels equal to ddtree's own on CPU instead).

Stdlib only at import time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

STANDIN_NAME = "sgl_kernel"
HYBRID_SUFFIX = "_hybrid"  # cpu_adapt_hybrid: what a hybrid (GDN) target needs besides


# --- 1. sgl_kernel *_cpu ops: torch bodies -------------------------------------------------


def _window_cells(req_pool_indices: Any, start_offset: Any, end_offset: Any) -> tuple[Any, Any]:
    """Return (rows, cols) of every req_to_token cell in each request's [start, end) window,
    requests packed in batch order (what the two ops below read or write)."""
    import torch

    starts = start_offset.to(torch.int64)
    lens = end_offset.to(torch.int64) - starts
    first = torch.cumsum(lens, 0) - lens
    rows = torch.repeat_interleave(req_pool_indices.to(torch.int64), lens)
    cols = torch.repeat_interleave(starts - first, lens) + torch.arange(int(lens.sum()))
    return rows, cols


def assign_req_to_token_pool_cpu(
    req_pool_indices: Any,
    req_to_token: Any,
    start_offset: Any,
    end_offset: Any,
    out_cache_loc: Any,
    pool_len: int,
) -> None:
    """Write each request's next slots (packed in batch order) into req_to_token[row, start:end]."""
    rows, cols = _window_cells(req_pool_indices, start_offset, end_offset)
    req_to_token[rows, cols] = out_cache_loc[: rows.numel()].to(req_to_token.dtype)


def assign_extend_cache_locs_cpu(
    req_pool_indices: Any,
    req_to_token: Any,
    start_offset: Any,
    end_offset: Any,
    out_cache_loc: Any,
    pool_len: int,
) -> None:
    """Read each request's req_to_token[row, start:end] into out_cache_loc (batch order)."""
    rows, cols = _window_cells(req_pool_indices, start_offset, end_offset)
    out_cache_loc[: rows.numel()] = req_to_token[rows, cols].to(out_cache_loc.dtype)


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices: Any,
    req_to_token: Any,
    seq_lens: Any,
    out_cache_loc: Any,
    pool_len: int,
    topk: int,
    num_cols: int,
) -> None:
    """Copy each request's ``topk * num_cols`` slots from ``seq_lens`` on into out_cache_loc."""
    import torch

    width = topk * num_cols
    cols = seq_lens.to(torch.int64).unsqueeze(1) + torch.arange(width).unsqueeze(0)
    rows = req_pool_indices.to(torch.int64).unsqueeze(1).expand_as(cols)
    out_cache_loc[: cols.numel()] = req_to_token[rows, cols].reshape(-1).to(out_cache_loc.dtype)


def fill_bonus_tokens_cpu(
    accept_tokens: Any, accept_lens: Any, bonus_tokens: Any, accept_stride: int
) -> None:
    """bonus[i] = the last accepted token of request i (accept lens count the bonus)."""
    import torch

    batch = bonus_tokens.shape[0]
    index = torch.arange(batch) * accept_stride + accept_lens[:batch].to(torch.int64) - 1
    bonus_tokens.copy_(accept_tokens.reshape(-1)[index].to(bonus_tokens.dtype))


def fill_accept_out_cache_loc_cpu(
    accept_index: Any, out_cache_loc: Any, accept_out_cache_loc: Any
) -> None:
    """Pack the slots of the accepted nodes (index != -1), in order, to the front."""
    flat = accept_index.reshape(-1)
    kept = flat[flat != -1].to(out_cache_loc.device).long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


CPU_OPS: dict[str, Callable[..., None]] = {
    "assign_req_to_token_pool_cpu": assign_req_to_token_pool_cpu,
    "assign_extend_cache_locs_cpu": assign_extend_cache_locs_cpu,
    "assign_draft_cache_locs_contiguous_cpu": assign_draft_cache_locs_contiguous_cpu,
    "fill_bonus_tokens_cpu": fill_bonus_tokens_cpu,
    "fill_accept_out_cache_loc_cpu": fill_accept_out_cache_loc_cpu,
}


def _missing_op(name: str) -> Callable[..., None]:
    """Module ``__getattr__`` of the stand-in: a refusing op for any op name it lacks."""
    if name.startswith("__"):
        raise AttributeError(name)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"cpu_adapt: sgl_kernel.{name} has no CPU stand-in")

    refuse.__name__ = name
    return refuse


def cpu_ops_standin() -> ModuleType:
    """Return a stand-in ``sgl_kernel`` module: the torch ops above, the rest refusing."""
    module = ModuleType(STANDIN_NAME)
    module.__dict__.update(CPU_OPS)
    module.__getattr__ = _missing_op  # type: ignore[method-assign]
    module.__ddtree_cpu_standin__ = True
    return module


def run_with_cpu_ops(run: Callable[[], None]) -> None:
    """Run one module's code with the stand-in as ``sgl_kernel``, then take it away again."""
    present = sys.modules.get(STANDIN_NAME)
    sys.modules[STANDIN_NAME] = cpu_ops_standin()
    try:
        run()
    finally:
        if present is None:
            sys.modules.pop(STANDIN_NAME, None)
        else:
            sys.modules[STANDIN_NAME] = present


CPU_OPS_MODULES = (
    "sglang.kernels.ops.kvcache.cache_move",
    "sglang.kernels.ops.speculative.cache_locs",
    "sglang.kernels.ops.speculative.eagle",
    "sglang.kernels.ops.speculative.multi_layer_eagle",
    "sglang.kernels.ops.speculative.spec_tree",
    "sglang.srt.mem_cache.allocation",
)


# --- 2. speculative decoding on the cpu device --------------------------------------------


def adapt_speculative_device(module: ModuleType) -> None:
    """Let DFLASH-family algorithms run on the cpu device (arg_groups/speculative_hook.py).

    ``_handle_dflash`` accepts only ``cuda*``, ``npu`` and ``xpu`` devices, spelled as literals
    in its code; the ``"xpu"`` literal becomes ``"cpu"`` (an xpu host never runs this fixture).
    """
    handler = module._handle_dflash
    consts = handler.__code__.co_consts
    if "xpu" not in consts:
        raise RuntimeError("cpu_adapt: _handle_dflash has no device literal to widen")
    swapped = tuple("cpu" if c == "xpu" else c for c in consts)
    handler.__code__ = handler.__code__.replace(co_consts=swapped)


# --- 3. torch_native as a draft backend ------------------------------------------------------


def adapt_draft_backend_choices(module: ModuleType) -> None:
    """Add torch_native to the draft attention backends (sglang/srt/arg_groups/choices.py).

    Uses sglang's own extension point (``add_draft_attention_backend_choices``); the list is
    shared by reference with server_args and draft_worker_common.
    """
    if "torch_native" not in module.DRAFT_ATTENTION_BACKEND_CHOICES:
        module.add_draft_attention_backend_choices(["torch_native"])


# --- 4. record_stream on CPU tensors ---------------------------------------------------------


def adapt_record_stream(module: ModuleType) -> None:
    """Make ``Tensor.record_stream`` a no-op on CPU tensors (called by dflash_worker_v2.py).

    CPU tensors have no streams and torch raises on them; CUDA tensors keep the real call.
    """
    import torch

    original = torch.Tensor.record_stream
    if getattr(original, "__ddtree_cpu_adapted__", False):
        return

    def record_stream(self: Any, stream: Any) -> None:
        if self.device.type == "cpu":
            return
        original(self, stream)

    record_stream.__ddtree_cpu_adapted__ = True  # type: ignore[attr-defined]
    torch.Tensor.record_stream = record_stream  # type: ignore[method-assign]


# --- 5. input_embeds dtype ------------------------------------------------------------------


def adapt_extend_kwargs_dtype(module: ModuleType) -> None:
    """Cast ``input_embeds`` back to the model's dtype (sglang/srt/model_executor/model_runner.py).

    ``ModelRunner._extend_forward_kwargs`` hard-casts ``forward_batch.input_embeds`` to
    bfloat16 (upstream, not CPU-specific), so a float32 DFlash draft fails on a dtype mismatch.
    """
    runner_class = module.ModelRunner
    original = runner_class._extend_forward_kwargs

    def extend_forward_kwargs(self: Any, forward_batch: Any, pp_proxy_tensors: Any) -> dict:
        kwargs = original(self, forward_batch, pp_proxy_tensors)
        embeds = kwargs.get("input_embeds")
        dtype = self.model_config.dtype
        if embeds is not None and embeds.dtype != dtype:
            kwargs["input_embeds"] = embeds.to(dtype)
        return kwargs

    runner_class._extend_forward_kwargs = extend_forward_kwargs


def _no_patch(module: ModuleType) -> None:
    """Modules that only need the sgl_kernel stand-in while they run."""


def hybrid_companion(base: ModuleType) -> ModuleType:
    """The hybrid-target adapters (``cpu_adapt_hybrid``), imported beside ``base``."""
    import importlib

    return importlib.import_module(f"{base.__name__}{HYBRID_SUFFIX}")


def patches(base: ModuleType) -> dict[str, Callable[[ModuleType], None]]:
    """Return module name -> adapter for sglang 0.5.23 (``base``: the cpu_adapt module),
    the hybrid target's (``cpu_adapt_hybrid``) included."""
    found: dict[str, Callable[[ModuleType], None]] = dict.fromkeys(CPU_OPS_MODULES, _no_patch)
    found.update(hybrid_companion(base).patches())
    found.update(
        {
            "sglang.srt.mem_cache.memory_pool": base.adapt_kv_copy_warmup,
            "sglang.srt.arg_groups.choices": adapt_draft_backend_choices,
            "sglang.srt.arg_groups.speculative_hook": adapt_speculative_device,
            "sglang.srt.speculative.dflash_worker_v2": adapt_record_stream,
            "sglang.srt.layers.attention.torch_native_backend": base.adapt_torch_native_verify,
            "sglang.srt.model_executor.model_runner": adapt_extend_kwargs_dtype,
        }
    )
    return found


def arounds(base: ModuleType) -> dict[str, Callable[[Callable[[], None]], None]]:
    """Return module name -> wrapper of that module's execution (the sgl_kernel stand-in, and
    the hybrid modules' generic branches)."""
    found = {name: run_with_cpu_ops for name in CPU_OPS_MODULES}
    return {**found, **hybrid_companion(base).arounds()}
