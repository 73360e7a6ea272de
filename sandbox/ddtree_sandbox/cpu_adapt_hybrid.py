"""In-memory CPU adaptation of sglang 0.5.23 for HYBRID (Gated DeltaNet) targets: a TEST FIXTURE.

The third part of the sandbox's CPU adaptation (``cpu_adapt`` holds the hook, ``cpu_adapt_0523``
the 0.5.23 adapters that include these). Installed beside them on a host as
``ddtree_sandbox_cpu_adapt_hybrid``; never shipped to real hosts; no installed file changes.
What a tiny Qwen3.5-text target (``make_hybrid.py``) needs to be served on a CPU-only machine
(facts: the shared note hybrid-on-cpu.md), each fixed by one function below:

1. With ``SGLANG_USE_CPU_ENGINE=1`` the GDN backend, its Triton kernel wrapper, the KDA backend
   and ``models/qwen3_5.py`` import sgl_kernel's CPU-build ops at module level (not on PyPI).
   These modules run with ``is_cpu()`` answering False (``run_as_generic``): they take the
   generic branches, i.e. sglang's own Triton kernels, run by the Triton interpreter
   (``TRITON_INTERPRET=1`` in the serve file).
2. fla's ``chunk_gated_delta_rule`` (prefill) refuses float32: an fp32 torch reference of it
   (``chunk_gated_delta_rule_reference``), the state ``[slots, HV, V, K]`` updated in place.
3. fla's gated RMSNorm asks ``torch.cuda.get_device_properties``: a torch body.
4. The fused Gemma QK-norm Triton kernels (``models/utils``) round q/k through bf16 even for an
   fp32 model (a SILENT precision trap: greedy differed from transformers at near-ties): fp32
   torch bodies.
5. The post-verify mamba state scatter (``mamba_state_scatter_triton``) is CUDA/XPU only: a
   torch indexing body (DFLASH and DDTREE on a hybrid target).

Stdlib only at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

GENERIC_MODULES = (
    "sglang.srt.layers.attention.linear.kernels.gdn_triton",
    "sglang.srt.layers.attention.linear.gdn_backend",
    "sglang.srt.layers.attention.linear.kda_backend",
    "sglang.srt.models.qwen3_5",
)


# --- 1. the generic (non-CPU) branches ---------------------------------------------------------


def _not_cpu() -> bool:
    """``is_cpu`` as the adapted modules see it: their CPU branches need sgl_kernel's CPU build."""
    return False


def run_as_generic(run: Callable[[], None]) -> None:
    """Run one module's code while ``sglang.srt.utils.is_cpu`` answers False (the module keeps
    that answer: it binds the name at import), then restore the real one for everyone else."""
    import sglang.srt.utils as utils

    real = utils.is_cpu
    utils.is_cpu = _not_cpu
    try:
        run()
    finally:
        utils.is_cpu = real


# --- 2. fla's chunked gated delta rule in fp32 -------------------------------------------------


def chunk_gated_delta_rule_reference(
    q: Any,
    k: Any,
    v: Any,
    g: Any,
    beta: Any,
    scale: float | None = None,
    initial_state: Any = None,
    initial_state_indices: Any = None,
    cu_seqlens: Any = None,
    head_first: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    inplace_update: bool = True,
) -> tuple[Any, None, None]:
    """The gated delta rule, token by token, in fp32: what fla's chunk kernel computes.

    q, k ``[1, T, H, K]``, v ``[1, T, HV, V]``, g (log decay) and beta ``[1, T, HV]``; sequences
    by ``cu_seqlens``; state of sequence i is ``initial_state[initial_state_indices[i]]``
    ``[HV, V, K]``, written back when ``inplace_update``. Returns (o ``[1, T, HV, V]``, None, None).
    """
    import torch

    if head_first:
        raise NotImplementedError("cpu_adapt: head_first chunk_gated_delta_rule")
    out_dtype = q.dtype
    q, k, v, g, beta = (t[0].float() for t in (q, k, v, g, beta))
    heads_v = v.shape[1]
    if q.shape[1] != heads_v:  # grouped value heads: each key head serves HV / H of them
        q = q.repeat_interleave(heads_v // q.shape[1], dim=1)
        k = k.repeat_interleave(heads_v // k.shape[1], dim=1)
    if use_qk_l2norm_in_kernel:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * (scale if scale is not None else q.shape[-1] ** -0.5)
    bounds = [0, q.shape[0]] if cu_seqlens is None else [int(x) for x in cu_seqlens.tolist()]
    out = torch.zeros_like(v)
    for i in range(len(bounds) - 1):
        slot = int(initial_state_indices[i]) if initial_state_indices is not None else i
        state = initial_state[slot].float().clone()  # [HV, V, K]
        for t in range(bounds[i], bounds[i + 1]):
            state = state * torch.exp(g[t])[:, None, None]
            remembered = torch.einsum("hvk,hk->hv", state, k[t])
            delta = (v[t] - remembered) * beta[t][:, None]
            state = state + delta[:, :, None] * k[t][:, None, :]
            out[t] = torch.einsum("hvk,hk->hv", state, q[t])
        if inplace_update:
            initial_state[slot] = state.to(initial_state.dtype)
    return out.unsqueeze(0).to(out_dtype), None, None


def adapt_gdn_kernel(module: ModuleType) -> None:
    """Give the GDN Triton kernel wrapper the fp32 reference for its prefill (gdn_triton.py),
    and decode through the sigmoid-gating recurrent kernel (the packed decode kernel calls a
    helper the Triton interpreter cannot run: "Did you forget to add @triton.jit?")."""
    module.chunk_gated_delta_rule = chunk_gated_delta_rule_reference
    module.TritonGDNKernel.supports_packed_decode = False


# --- 3. gated RMSNorm ---------------------------------------------------------------------


def adapt_gated_rmsnorm(module: ModuleType) -> None:
    """A torch body for fla's gated RMSNorm (kernels/ops/attention/fla/layernorm_gated.py):
    ``norm(x) * weight * act(z)`` (norm before gate, one group), computed in fp32."""
    import torch

    def forward(self: Any, x: Any, z: Any = None) -> Any:
        if not self.norm_before_gate or self.group_size not in (None, x.shape[-1]):
            raise NotImplementedError("cpu_adapt: gated RMSNorm other than norm-before-gate")
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()
        if z is not None:
            zf = z.float()
            y = y * (torch.sigmoid(zf) if self.activation == "sigmoid" else zf * torch.sigmoid(zf))
        return y.to(x.dtype)

    module.RMSNorm.forward = forward


# --- 4. Gemma QK-norm in fp32 ----------------------------------------------------------------


def _gemma_rmsnorm(x: Any, weight: Any, eps: float) -> Any:
    import torch

    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight.float())
    return y.to(x.dtype)


def fused_qk_gemma_rmsnorm(
    q: Any, k: Any, q_weight: Any, k_weight: Any, eps: float, head_dim: int
) -> tuple[Any, Any]:
    """models/utils' fused QK GemmaRMSNorm, per head in fp32: (q rows, k rows) of head_dim."""
    q_rows = _gemma_rmsnorm(q.reshape(-1, head_dim), q_weight, eps)
    return q_rows, _gemma_rmsnorm(k.reshape(-1, head_dim), k_weight, eps)


def fused_qk_gemma_rmsnorm_with_gate(
    q_gate: Any, k: Any, q_weight: Any, k_weight: Any, eps: float, head_dim: int, num_heads: int
) -> tuple[Any, Any, Any]:
    """The same with q and gate interleaved per head in ``q_gate``: (q, k, gate) rows."""
    per_head = q_gate.reshape(q_gate.shape[0], num_heads, 2 * head_dim)
    q = per_head[..., :head_dim].reshape(-1, head_dim)
    gate = per_head[..., head_dim:].reshape(-1, head_dim).contiguous()
    q_rows, k_rows = fused_qk_gemma_rmsnorm(q, k, q_weight, k_weight, eps, head_dim)
    return q_rows, k_rows, gate


def adapt_qwen3_5(module: ModuleType) -> None:
    """fp32 QK-norm bodies in models/qwen3_5.py (it imported the Triton ones)."""
    module.fused_qk_gemma_rmsnorm = fused_qk_gemma_rmsnorm
    module.fused_qk_gemma_rmsnorm_with_gate = fused_qk_gemma_rmsnorm_with_gate


# --- 5. the post-verify state scatter -------------------------------------------------------


def mamba_state_scatter_reference(
    dst: Any, src: Any, dst_indices_raw: Any, step_indices_raw: Any, src_indices_raw: Any = None
) -> None:
    """``dst[:, dst[i]] = src[:, src_row[i], step[i]]`` for every request i whose step is >= 0
    (and in bounds), as the Triton kernel does; ``src_row`` defaults to i."""
    import torch

    steps = step_indices_raw.to(torch.int64)
    rows = torch.arange(steps.numel()) if src_indices_raw is None else src_indices_raw
    rows, dests = rows.to(torch.int64), dst_indices_raw.to(torch.int64)
    valid = (steps >= 0) & (steps < src.shape[2]) & (rows >= 0) & (rows < src.shape[1])
    valid &= (dests >= 0) & (dests < dst.shape[1])
    if bool(valid.any()):
        dst[:, dests[valid]] = src[:, rows[valid], steps[valid]].to(dst.dtype)


def adapt_state_scatter(module: ModuleType) -> None:
    """A torch body for the masked mamba state scatters (mamba_state_scatter_triton.py: the
    SSM state's and the conv window's, a strided view the indexing reads as it is), which
    refuse tensors that are not on CUDA/XPU."""
    module.fused_mamba_state_scatter_with_mask = mamba_state_scatter_reference
    module.fused_conv_window_scatter_with_mask = mamba_state_scatter_reference


def _no_patch(module: ModuleType) -> None:
    """Modules that only need the generic branches while they run."""


def patches() -> dict[str, Callable[[ModuleType], None]]:
    """Module name -> adapter for a hybrid target on sglang 0.5.23 (see cpu_adapt_0523)."""
    found: dict[str, Callable[[ModuleType], None]] = dict.fromkeys(GENERIC_MODULES, _no_patch)
    found.update(
        {
            "sglang.srt.layers.attention.linear.kernels.gdn_triton": adapt_gdn_kernel,
            "sglang.srt.models.qwen3_5": adapt_qwen3_5,
            "sglang.kernels.ops.attention.fla.layernorm_gated": adapt_gated_rmsnorm,
            "sglang.kernels.ops.mamba.mamba_state_scatter_triton": adapt_state_scatter,
        }
    )
    return found


def arounds() -> dict[str, Callable[[Callable[[], None]], None]]:
    """Module name -> wrapper of its execution (the generic branches)."""
    return dict.fromkeys(GENERIC_MODULES, run_as_generic)
