"""Environment and command-line flags for a real sglang 0.5.13.post1 server in the sandbox (CPU).

Pure helpers: nothing here starts a process. The sandbox's service script combines them:
``SERVE_ENV`` + a private ``TMPDIR`` (the script sets it; sglang leaves IPC files there) and
``python -m sglang.launch_server`` + ``base_launch_args(...)`` [+ ``dflash_args(...)`` or
``ddtree_args(...)``]. Speculative decoding on CPU also needs the test fixture
``cpu_adapt`` installed in the host venv (``install_cpu_adapt``); ``SERVE_ENV`` switches it on.
"""

from __future__ import annotations

import json
from pathlib import Path

# KV pool and context caps: without --max-total-tokens sglang sizes the KV pool from about
# 62% of free RAM; these keep a tiny model's server near 1.9 GB RSS.
# The sglang a real sandbox server runs: 0.5.13.post1 (DFlashWorker, V1) by default, or
# 0.5.23 (DFlashWorkerV2 under the overlap scheduler). Both are adapted by cpu_adapt.
V1_SGLANG = "0.5.13.post1"
OVERLAP_VERSIONS = frozenset({"0.5.23"})
SERVING_VERSIONS = (V1_SGLANG, *sorted(OVERLAP_VERSIONS))
MAX_TOTAL_TOKENS = 4096
CONTEXT_LENGTH = 1024

SERVE_ENV: dict[str, str] = {
    # CPU code paths in sglang (rotary embedding etc.); without it sglang imports vllm.
    "SGLANG_USE_CPU_ENGINE": "1",
    # Turns on the in-memory CPU adaptation fixture (sandbox/ddtree_sandbox/cpu_adapt.py).
    "DDTREE_SANDBOX_CPU_ADAPT": "1",
    # sglang's pure-torch KV move instead of the Triton copy kernel (speculative decoding).
    "SGLANG_NATIVE_MOVE_KV_CACHE": "1",
    # Triton must never look for a GPU driver, and no GPU may be picked up by accident.
    "CUDA_VISIBLE_DEVICES": "",
    # One intra-op thread: a hidden-64 model gains nothing from two, and OpenMP threads
    # spin-wait, so several servers (or a server and a test run) on 2 cores slow each other
    # down many times over.
    "OMP_NUM_THREADS": "1",
    # Hub access does not exist; models are local directories.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}

# A hybrid (Gated DeltaNet) target, sandbox model "hybrid" (make_hybrid.py), on sglang 0.5.23:
# the radix cache would select the mamba "extra_buffer", which refuses the cpu platform; an
# unset mamba cache is sized from free RAM (7.3 GB, 18.6 s to allocate). Its GDN and conv
# kernels are sglang's Triton ones, interpreted (cpu_adapt_hybrid), and the conv state would
# default to bf16 (a silent precision trap in an fp32 comparison).
HYBRID_MODEL_TYPES = frozenset({"qwen3_5_text"})
HYBRID_ARGS = ("--disable-radix-cache", "--max-mamba-cache-size", "64")
HYBRID_ENV: dict[str, str] = {"TRITON_INTERPRET": "1", "SGLANG_MAMBA_CONV_DTYPE": "float32"}

# What DDTREE (patchset ddtree >= 1.1.0) adds on top of dflash_args, and why:
# --speculative-algorithm DDTREE           the registered algorithm (tree verify in the DFlash
#                                          V1 worker); --speculative-ddtree-budget N (>= 1)
#                                          tree nodes besides the root (verify width N + 1);
# --speculative-draft-model-path DRAFT     the same DFlash draft as DFLASH;
# --page-size 1                            tree KV slots are compacted per token (base args);
# --disable-cuda-graph                     (base args) torch_native has no graphs anyway;
# tp 1, no overlap scheduling              (defaults here; the check refuses others).


# A server at --tp-size N > 1 on this CPU (sglang 0.5.23; docs/ddtree.md, "A real --tp-size 2
# server"): one core per rank (numa_utils asserts ranks <= NUMA nodes unless the binding is
# given), and eager mode (the TP embedding's masked input is a torch.compile function whose
# inductor CPU backend needs a C++ toolchain and setuptools; eager gives the same numbers).
TP_ENV: dict[str, str] = {"SGLANG_CPU_OMP_THREADS_BIND": "0|1", "TORCH_COMPILE_DISABLE": "1"}
TP_SIZES = (1, 2)


def base_launch_args(
    model_dir: Path, host: str, port: int, dtype: str | None = None, tp_size: int = 1
) -> list[str]:
    """Return the ``sglang.launch_server`` flags of a plain CPU server for ``model_dir``.

    ``dtype`` defaults to the ``torch_dtype`` of ``model_dir/config.json`` when that file
    exists (so the bf16 target stays bf16), else float32. ``--dtype auto`` is never used: it
    turns a float32 config into float16.
    """
    dtype = dtype or read_config_dtype(Path(model_dir))
    return [
        "--model-path", str(model_dir),
        "--host", host,
        "--port", str(port),
        # No GPU: run on CPU with sglang's pure-torch SDPA attention backend.
        "--device", "cpu",
        "--attention-backend", "torch_native",
        # CUDA graphs need CUDA.
        "--disable-cuda-graph",
        # xgrammar is not installed in the sandbox; only /v1/responses is lost.
        "--grammar-backend", "none",
        # Compare speculative and plain decoding in fp32: bf16 rounding differs between a
        # multi-token verify and a 1-token decode and diverges after ~60 tokens.
        "--dtype", dtype,
        # Caps (see MAX_TOTAL_TOKENS).
        "--max-total-tokens", str(MAX_TOTAL_TOKENS),
        # Unset, sglang derives it from the RAM free at start less what it reserves for
        # prefill activations and a draft model (GPU-sized): with ~21 GB free it came out
        # too small and KV pool sizing failed ("Not enough memory"). The pool is capped by
        # --max-total-tokens anyway; the fraction only has to leave it room.
        "--mem-fraction-static", "0.5",
        "--context-length", str(CONTEXT_LENGTH),
        # DDTREE needs page size 1 (KV compaction is an index remap); same for every server.
        "--page-size", "1",
        # Deterministic sampling seeds when a request is not greedy.
        "--random-seed", "0",
        # The warmup request costs start-up time; /health_generate serves as readiness.
        "--skip-server-warmup",
        # An idle scheduler otherwise polls its sockets in a busy loop, one core at 100%:
        # with two cores and two hosts that halves everything else's speed.
        "--sleep-on-idle",
        # GET /metrics (Prometheus text, sglang:* names): what a serving gate watches over a
        # bake period (requests, aborts, queue, accept length). Needs prometheus_client in
        # the host env (requirements-sglang-*.txt).
        "--enable-metrics",
        *(HYBRID_ARGS if is_hybrid_model(Path(model_dir)) else ()),
        # Tensor parallelism over the CPU's cores (gloo all-reduce; TP_ENV).
        *(("--tp-size", str(tp_size)) if tp_size > 1 else ()),
    ]  # fmt: skip


def is_hybrid_model(model_dir: Path) -> bool:
    """Whether ``model_dir/config.json`` names a hybrid linear-attention target."""
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        return False
    return json.loads(config_path.read_text()).get("model_type") in HYBRID_MODEL_TYPES


def serve_env(model_dir: Path, tp_size: int = 1) -> dict[str, str]:
    """The serve file's environment for a server of ``model_dir`` (SERVE_ENV, + HYBRID_ENV,
    + TP_ENV at ``tp_size`` > 1)."""
    return {
        **SERVE_ENV,
        **(HYBRID_ENV if is_hybrid_model(Path(model_dir)) else {}),
        **(TP_ENV if tp_size > 1 else {}),
    }


def dflash_args(draft_dir: Path, block_size: int, sglang_version: str = V1_SGLANG) -> list[str]:
    """Return the flags that turn a plain server into a DFLASH one with ``draft_dir``.

    sglang 0.5.13.post1 serves DFLASH with its V1 worker, which does not overlap; sglang 0.5.23
    serves it with DFlashWorkerV2 under the overlap scheduler (its default, kept on).
    """
    overlap_flags = [] if sglang_version in OVERLAP_VERSIONS else ["--disable-overlap-schedule"]
    return [
        "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", str(draft_dir),
        # The draft's block (its config says the same; sglang checks they agree).
        "--speculative-dflash-block-size", str(block_size),
        # The DFlash draft runs on torch_native too (accepted thanks to cpu_adapt).
        "--speculative-draft-attention-backend", "torch_native",
        # Spec v1 (DFlashWorker) does not overlap; say so instead of relying on auto-off.
        *overlap_flags,
    ]  # fmt: skip


def ddtree_args(
    draft_dir: Path, block_size: int, budget: int, sglang_version: str = V1_SGLANG
) -> list[str]:
    """Return the DDTREE flags: DFLASH's, with the algorithm DDTREE and a tree budget."""
    args = dflash_args(draft_dir, block_size, sglang_version)
    args[args.index("DFLASH")] = "DDTREE"
    return [*args, "--speculative-ddtree-budget", str(budget)]


def read_config_dtype(model_dir: Path) -> str:
    """Return the dtype named by ``model_dir/config.json`` (float32 when absent or unnamed)."""
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        return "float32"
    config = json.loads(config_path.read_text())
    return str(config.get("torch_dtype") or config.get("dtype") or "float32")
