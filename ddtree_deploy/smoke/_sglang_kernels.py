"""Load SGLang's own tree kernels from the installed sglang (run by a python that has torch,
triton and that sglang on sys.path: the sandbox base env, or a GPU host's env).

We import the kernel modules through the sglang package (not the files alone): their module
level reads sglang's platform helpers (`is_cuda`, `envs`), and importing them the way the
worker will is what proves they load. The one missing piece on a CPU machine is flashinfer
(uno_tree.py imports `flashinfer.top_k` at module level); `install_flashinfer_standin` puts
a TEST STAND-IN in its place, used only for a CPU run (`standin=True`) when flashinfer is
not installed; a CUDA run imports the real flashinfer or fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass

import torch


class CudaLooking(torch.Tensor):
    """TEST STAND-IN: a CPU tensor that answers `is_cuda` True, so `build_uno_tree_proposal`'s
    CUDA-only input check lets its Triton kernels run under TRITON_INTERPRET=1."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def _standin_top_k(
    values: torch.Tensor, k: int, sorted: bool = True, deterministic: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """TEST STAND-IN for flashinfer.top_k: the k largest per row, best first, equal values in
    token-id order (a stable sort; flashinfer's own tie order is not specified)."""
    del sorted, deterministic
    top, ids = torch.sort(values.as_subclass(torch.Tensor), dim=-1, descending=True, stable=True)
    return top[..., :k].contiguous(), ids[..., :k].contiguous()


def install_flashinfer_standin() -> bool:
    """Register the stand-in `flashinfer` module when none is installed; True if it did."""
    if "flashinfer" in sys.modules or importlib.util.find_spec("flashinfer") is not None:
        return False
    module = types.ModuleType("flashinfer")
    module.__doc__ = "TEST STAND-IN (CPU kernel checks): top_k only, torch.sort based."
    module.top_k = _standin_top_k  # type: ignore[attr-defined]
    sys.modules["flashinfer"] = module
    return True


@dataclass(frozen=True)
class Kernels:
    """The kernel modules of one sglang install (attention only for 0.5.13.post1)."""

    version: str
    extend_attention_fwd: object
    uno: types.ModuleType | None = None
    spec_tree: types.ModuleType | None = None
    eagle: types.ModuleType | None = None
    flashinfer_standin: bool = False


def load_kernels(standin: bool) -> Kernels:
    """Import the installed sglang's tree kernels; 0.5.13.post1 has only the attention.

    standin: allow the flashinfer top-k stand-in when flashinfer is missing (CPU runs only).
    """
    import sglang

    version = getattr(sglang, "__version__", "")
    if importlib.util.find_spec("sglang.kernels") is None:
        attention = importlib.import_module(
            "sglang.srt.layers.attention.triton_ops.extend_attention"
        )
        return Kernels(version=version, extend_attention_fwd=attention.extend_attention_fwd)
    standin = standin and install_flashinfer_standin()
    attention = importlib.import_module("sglang.kernels.ops.attention.extend_attention")
    return Kernels(
        version=version,
        extend_attention_fwd=attention.extend_attention_fwd,
        uno=importlib.import_module("sglang.kernels.ops.speculative.uno_tree"),
        spec_tree=importlib.import_module("sglang.kernels.ops.speculative.spec_tree"),
        eagle=importlib.import_module("sglang.kernels.ops.speculative.eagle"),
        flashinfer_standin=standin,
    )


def as_kernel_input(tensor: torch.Tensor) -> torch.Tensor:
    """Return `tensor` as the UNO builder accepts it: itself on CUDA, CudaLooking on CPU."""
    return tensor if tensor.is_cuda else tensor.as_subclass(CudaLooking)
