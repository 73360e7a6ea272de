"""In-memory CPU adaptation of sglang for speculative decoding: a TEST FIXTURE.

The hook and the 0.5.13.post1 adapters live here; sglang 0.5.23's adapters live in the
companion module ``cpu_adapt_0523`` (chosen by the installed sglang's version).

Never shipped to real hosts. The sandbox installs it into a host venv as the stand-alone module
``ddtree_sandbox_cpu_adapt`` plus ``ddtree-sandbox-cpu-adapt.pth`` (see ``install_cpu_adapt``),
so every interpreter of that venv, sglang's spawned scheduler processes included, imports it
at start-up. It does nothing unless ``DDTREE_SANDBOX_CPU_ADAPT=1``: then it puts an import hook
first on ``sys.meta_path`` that runs the real module code of a few sglang modules and patches
their objects right after (no installed file is read differently or changed, so the integrity
suite's RECORD hashes still hold). Each ``adapt_*`` function below fixes one blocker met when
DFLASH / DDTREE run on a CPU-only machine with ``--attention-backend torch_native``.

``DDTREE_SANDBOX_IGNORE_TREE_MASK=1`` (negative-control experiments only) makes verify drop
``spec_info.custom_mask`` and attend causally, which a lossless check must catch.

Stdlib only at import time: without the flag, importing this module loads neither torch nor
sglang. It is also cheap then (~2 ms): every python start on a sandbox host pays it, the
agent's and each service command's included, so it imports nothing a bare interpreter has not
loaded already (no ``importlib.abc``, ``importlib.metadata``, ``pathlib`` or ``typing``,
together ~60 ms of CPU per start on python 3.11); the hook's finder and loader follow the
import protocol without the ABCs.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from collections.abc import Callable
from types import ModuleType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see the docstring)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

ENV_FLAG = "DDTREE_SANDBOX_CPU_ADAPT"
IGNORE_TREE_MASK_FLAG = "DDTREE_SANDBOX_IGNORE_TREE_MASK"
MODULE_NAME = "ddtree_sandbox_cpu_adapt"
PTH_NAME = "ddtree-sandbox-cpu-adapt.pth"
TORCH_NATIVE = "torch_native"
TORCH_NATIVE_CLASS = "TorchNativeAttnBackend"
V2_SGLANG = "0.5.23"  # adapted by the companion module cpu_adapt_0523 (DFlashWorkerV2)
V2_SUFFIX = "_0523"
HYBRID_SUFFIX = "_hybrid"  # cpu_adapt_hybrid: 0.5.23 adapters of hybrid (GDN) targets


# --- 1. Triton KV-copy warmup -----------------------------------------------------------


def adapt_kv_copy_warmup(module: ModuleType) -> None:
    """Skip the Triton KV-copy warmup of CPU pools (sglang/srt/mem_cache/memory_pool.py).

    ``MHATokenToKVPool._init_kv_copy_and_warmup`` launches the Triton kernel
    ``copy_all_layer_kv_cache_tiled`` whenever speculative decoding is on, which fails on a
    machine with no GPU ("0 active drivers"). On CPU the pool keeps no copy config;
    ``move_kv_cache`` then takes sglang's own pure-torch path because activation sets
    ``SGLANG_NATIVE_MOVE_KV_CACHE=1``.
    """
    pool_class = module.MHATokenToKVPool
    original = pool_class._init_kv_copy_and_warmup

    def init_kv_copy_unless_cpu(self: Any) -> None:
        if str(self.device).startswith("cpu"):
            self._kv_copy_config = None
            return
        original(self)

    pool_class._init_kv_copy_and_warmup = init_kv_copy_unless_cpu


# --- 2. torch_native as the DFlash draft backend -----------------------------------------


def adapt_dflash_draft_backends(module: ModuleType) -> None:
    """Let DFlashWorker keep a torch_native draft (sglang/srt/speculative/dflash_worker.py).

    ``DFlashWorker.__init__`` accepts only the backends in a tuple literal
    ``("flashinfer", "fa3", "fa4", "triton", "ascend")`` and otherwise silently falls back to
    flashinfer, which cannot load on CPU. torch_native already runs the draft's ENCODER_ONLY
    (non-causal) attention, so add it to that constant in the compiled ``__init__``.
    """
    init = module.DFlashWorker.__init__
    allowed = ("flashinfer", "fa3", "fa4", "triton", "ascend")
    consts = init.__code__.co_consts
    if allowed not in consts:
        raise RuntimeError("cpu_adapt: DFlashWorker.__init__ has no draft-backend tuple to extend")
    widened = tuple((*c, TORCH_NATIVE) if c == allowed else c for c in consts)
    init.__code__ = init.__code__.replace(co_consts=widened)


# --- 3. assign_req_to_token_pool without Triton ------------------------------------------


def adapt_assign_req_to_token_pool(module: ModuleType) -> None:
    """Give ``assign_req_to_token_pool_func`` a torch body (speculative/triton_ops/cache_locs.py).

    The original launches a Triton kernel that has no CPU path. Importers bind the name with
    ``from ... import``, which is why the module attribute is replaced right after the module
    runs, before spec_utils, dflash_info or dflash_worker import it.
    """
    module.assign_req_to_token_pool_func = assign_req_to_token_pool_torch


def assign_req_to_token_pool_torch(
    req_pool_indices: Any,
    req_to_token: Any,
    start_offset: Any,
    end_offset: Any,
    out_cache_loc: Any,
    batch_size: int,
) -> None:
    """Write each request's slots into req_to_token[row, start:end], as the Triton kernel does.

    The slots of request i are the next ``end[i] - start[i]`` entries of ``out_cache_loc``
    (requests packed in batch order).
    """
    import torch

    starts = start_offset[:batch_size].to(torch.int64)
    lens = end_offset[:batch_size].to(torch.int64) - starts
    total = int(lens.sum().item())
    if total == 0:
        return
    first_slot = torch.cumsum(lens, 0) - lens
    rows = torch.repeat_interleave(req_pool_indices[:batch_size].to(torch.int64), lens)
    flat = torch.arange(total, dtype=torch.int64, device=lens.device)
    cols = torch.repeat_interleave(starts - first_slot, lens) + flat
    req_to_token[rows, cols] = out_cache_loc[:total].to(req_to_token.dtype)


# --- 4 + 5. torch_native TARGET_VERIFY: lengths and custom mask ---------------------------


def adapt_torch_native_verify(module: ModuleType) -> None:
    """Send torch_native TARGET_VERIFY to ``run_verify_attention`` (torch_native_backend.py).

    ``TorchNativeAttnBackend.forward_extend`` reads ``extend_prefix_lens``/``extend_seq_lens``,
    which are None in TARGET_VERIFY (blocker 4), and it never reads ``spec_info.custom_mask``
    (blocker 5), so tree verify (DDTREE, NGRAM) would attend as a chain.
    """
    backend_class = getattr(module, TORCH_NATIVE_CLASS)
    original = backend_class.forward_extend

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True):
        if forward_batch.forward_mode.is_target_verify():
            return run_verify_attention(self, q, k, v, layer, forward_batch, save_kv_cache)
        return original(self, q, k, v, layer, forward_batch, save_kv_cache)

    backend_class.forward_extend = forward_extend


def derive_verify_lens(forward_batch: Any, num_tokens: int) -> tuple[list[int], int]:
    """Return (prefix length per request, verify width) of a TARGET_VERIFY batch (blocker 4).

    In that mode ``seq_lens`` holds the committed prefix lengths and every request appends
    the same number of tokens: ``num_tokens / batch size``.
    """
    prefix_lens = [int(n) for n in forward_batch.seq_lens.tolist()]
    width, rest = divmod(num_tokens, max(len(prefix_lens), 1))
    if rest:
        raise RuntimeError(f"cpu_adapt: {num_tokens} verify tokens for {len(prefix_lens)} requests")
    return prefix_lens, width


def split_verify_masks(
    custom_mask: Any, prefix_lens: list[int], width: int, device: Any
) -> list[Any]:
    """Return one bool allow-mask [width, prefix + width] per request (blocker 5).

    ``custom_mask`` is sglang's flat verify mask: per request either [width, prefix + width]
    (DFLASH, DDTREE, EAGLE) or [width, width] over the draft tokens only, the prefix being
    visible to all (NGRAM); blocks are concatenated in batch order. None gives the causal
    chain mask.
    """
    import torch

    full_sizes = [width * (prefix + width) for prefix in prefix_lens]
    masks = []
    offset = 0
    for prefix, full_size in zip(prefix_lens, full_sizes, strict=True):
        if custom_mask is None:
            q_index = torch.arange(width, device=device).unsqueeze(1)
            k_index = torch.arange(prefix + width, device=device).unsqueeze(0)
            masks.append(k_index <= prefix + q_index)
            continue
        if custom_mask.numel() >= sum(full_sizes):
            block = custom_mask[offset : offset + full_size].view(width, prefix + width)
            offset += full_size
        else:
            tree = custom_mask[offset : offset + width * width].view(width, width)
            offset += width * width
            visible = torch.ones((width, prefix), dtype=torch.bool, device=device)
            block = torch.cat([visible, tree.to(torch.bool)], dim=1)
        masks.append(block.to(torch.bool))
    return masks


def run_verify_attention(
    backend: Any, q: Any, k: Any, v: Any, layer: Any, forward_batch: Any, save_kv_cache: bool
) -> Any:
    """Return TARGET_VERIFY attention output [tokens, heads * v_head_dim] with masked SDPA.

    Causal layers use ``spec_info.custom_mask`` (or the chain mask when there is none);
    ENCODER_ONLY layers (the DFlash draft block) see every prefix and block token.
    """
    from sglang.srt.layers.radix_attention import AttentionType
    from torch.nn.functional import scaled_dot_product_attention

    pool = backend.token_to_kv_pool
    if save_kv_cache and k is not None and v is not None:
        pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
    k_cache = pool.get_key_buffer(layer.layer_id)
    v_cache = pool.get_value_buffer(layer.layer_id)
    query = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
    output = query.new_empty((query.shape[0], layer.tp_q_head_num, layer.v_head_dim))
    prefix_lens, width = derive_verify_lens(forward_batch, query.shape[0])
    non_causal = layer.is_cross_attention or layer.attn_type == AttentionType.ENCODER_ONLY
    custom_mask = getattr(forward_batch.spec_info, "custom_mask", None)
    if os.environ.get(IGNORE_TREE_MASK_FLAG) == "1":
        custom_mask = None
    masks = [None] * len(prefix_lens)
    if not non_causal:
        masks = split_verify_masks(custom_mask, prefix_lens, width, query.device)
    req_to_token = backend.req_to_token_pool.req_to_token
    for i, prefix in enumerate(prefix_lens):
        rows = slice(i * width, (i + 1) * width)
        slots = req_to_token[forward_batch.req_pool_indices[i], : prefix + width]
        per_query = query[rows].movedim(0, 1).unsqueeze(0)
        per_key = k_cache[slots].movedim(0, 1).unsqueeze(0).to(query.dtype)
        per_value = v_cache[slots].movedim(0, 1).unsqueeze(0).to(query.dtype)
        attended = scaled_dot_product_attention(
            per_query,
            per_key,
            per_value,
            attn_mask=masks[i],
            scale=layer.scaling,
            enable_gqa=layer.tp_q_head_num != layer.tp_k_head_num,
        )
        output[rows] = attended.squeeze(0).movedim(0, 1)
    return output.view(query.shape[0], -1)


# --- 6. DDTREE's start-up check ------------------------------------------------------------


def adapt_ddtree_mask_backends(module: ModuleType) -> None:
    """Let DDTREE 1.1.0 accept torch_native (sglang/srt/speculative/ddtree_worker_utils.py).

    ``find_ddtree_restriction_errors`` (called by ddtree_info.check_ddtree_worker) refuses
    attention backends outside ``DDTREE_MASK_BACKENDS``; with blocker 5 adapted torch_native
    applies the tree mask, so it joins that tuple. Only runs where the patchset is applied.
    """
    backends = tuple(module.DDTREE_MASK_BACKENDS)
    if TORCH_NATIVE_CLASS not in backends:
        module.DDTREE_MASK_BACKENDS = (*backends, TORCH_NATIVE_CLASS)


# --- 7. input_embeds dtype -----------------------------------------------------------------


def adapt_input_embeds_dtype(module: ModuleType) -> None:
    """Cast ``input_embeds`` to the model's dtype (sglang/srt/model_executor/model_runner.py).

    ``ModelRunner.forward_extend`` hard-casts ``forward_batch.input_embeds`` to bfloat16 (an
    upstream bug, not CPU-specific), so a float32 DFlash draft, which always gets
    input_embeds, fails on a dtype mismatch. The model's forward is wrapped once per runner to
    cast them back to the runner's dtype.
    """
    runner_class = module.ModelRunner
    original = runner_class.forward_extend

    def forward_extend(self, forward_batch, *args, **kwargs):
        model = self.model
        if forward_batch.input_embeds is not None and "forward" not in vars(model):
            model.forward = cast_input_embeds(model.forward, self.model_config.dtype)
        return original(self, forward_batch, *args, **kwargs)

    runner_class.forward_extend = forward_extend


def cast_input_embeds(forward: Callable[..., Any], dtype: Any) -> Callable[..., Any]:
    """Return ``forward`` with its ``input_embeds`` keyword cast to ``dtype``."""

    def forward_in_model_dtype(*args: Any, **kwargs: Any) -> Any:
        embeds = kwargs.get("input_embeds")
        if embeds is not None and embeds.dtype != dtype:
            kwargs["input_embeds"] = embeds.to(dtype)
        return forward(*args, **kwargs)

    return forward_in_model_dtype


# --- the import hook ---------------------------------------------------------------------

PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "sglang.srt.mem_cache.memory_pool": adapt_kv_copy_warmup,
    "sglang.srt.speculative.dflash_worker": adapt_dflash_draft_backends,
    "sglang.srt.speculative.triton_ops.cache_locs": adapt_assign_req_to_token_pool,
    "sglang.srt.layers.attention.torch_native_backend": adapt_torch_native_verify,
    "sglang.srt.speculative.ddtree_worker_utils": adapt_ddtree_mask_backends,
    "sglang.srt.model_executor.model_runner": adapt_input_embeds_dtype,
}
ENV_DEFAULTS = {"SGLANG_NATIVE_MOVE_KV_CACHE": "1"}


Around = Callable[[Callable[[], None]], None]


class PatchingLoader:
    """Run the real loader (inside ``around`` when given), then one ``adapt_*`` function
    (an import-protocol loader: create_module + exec_module)."""

    def __init__(
        self, inner: Any, patch: Callable[[ModuleType], None], around: Around | None = None
    ) -> None:
        self._inner = inner
        self._patch = patch
        self._around = around

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self._around is None:
            self._inner.exec_module(module)
        else:
            self._around(lambda: self._inner.exec_module(module))
        self._patch(module)
        module.__ddtree_cpu_adapted__ = self._patch.__name__

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for inspect
        return getattr(self._inner, name)


class PatchingFinder:
    """Find the modules named in ``patches`` on the normal path and wrap their loaders (a
    ``sys.meta_path`` finder: find_spec)."""

    def __init__(
        self,
        patches: dict[str, Callable[[ModuleType], None]],
        arounds: dict[str, Around] | None = None,
    ) -> None:
        self.patches = patches
        self.arounds = arounds or {}

    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = PatchingLoader(spec.loader, patch, self.arounds.get(fullname))
        return spec


def installed_sglang_version() -> str | None:
    """Return the installed sglang's version from its dist-info (imports no sglang code)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def select_finder() -> PatchingFinder:
    """Return the finder for the installed sglang: 0.5.23's adapters, else 0.5.13.post1's."""
    if installed_sglang_version() == V2_SGLANG:
        sibling = importlib.import_module(f"{__name__}{V2_SUFFIX}")
        base = sys.modules[__name__]
        return PatchingFinder(sibling.patches(base), sibling.arounds(base))
    return PatchingFinder(PATCHES)


def activate_from_env() -> bool:
    """Install the import hook when ``DDTREE_SANDBOX_CPU_ADAPT=1``; return whether it is on."""
    if os.environ.get(ENV_FLAG) != "1":
        return False
    for name, value in ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if not any(isinstance(finder, PatchingFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, select_finder())
    return True


def install_cpu_adapt(site_packages: Path) -> None:
    """Write this module and its 0.5.23 and hybrid companions (as
    ``ddtree_sandbox_cpu_adapt*.py``) plus the .pth that imports it into ``site_packages``.

    Adds four files of its own and changes no file of any installed distribution.
    """
    from pathlib import Path

    site_packages = Path(site_packages)
    here = Path(__file__)
    (site_packages / f"{MODULE_NAME}.py").write_text(here.read_text())
    for suffix in (V2_SUFFIX, HYBRID_SUFFIX):
        companion = here.with_name(f"{here.stem}{suffix}.py")
        (site_packages / f"{MODULE_NAME}{suffix}.py").write_text(companion.read_text())
    (site_packages / PTH_NAME).write_text(f"import {MODULE_NAME}\n")


activate_from_env()
