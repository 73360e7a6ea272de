"""The CPU serving fixture without a server: tiny models, the cpu_adapt hook, its install."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ddtree_sandbox.baseenv import SYSTEM_PYTHON
from ddtree_sandbox.cpu_adapt import ENV_FLAG, MODULE_NAME, PTH_NAME
from ddtree_sandbox.models import DEFAULT_RECIPE, MAKE_MODELS, MODEL_KINDS, ensure_models

CPU_ADAPT_FILE = Path(__file__).parents[2] / "sandbox" / "ddtree_sandbox" / "cpu_adapt.py"
PATCHSET_DIR = Path(__file__).parents[2] / "patchsets" / "ddtree" / "1.1.0"


def hash_tree(root: Path) -> dict[str, str]:
    """Return relative path -> sha256 of every file under ``root`` but the ready marker."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "ready"
    }


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_FLAG, "PYTHONPATH")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def models(base_env):
    return ensure_models(base_env)


def test_models_are_cached_and_byte_deterministic(base_env, models, tmp_path):
    started = time.monotonic()
    again = ensure_models(base_env)
    assert time.monotonic() - started < 1.0
    assert again == models
    rebuilt = tmp_path / "rebuilt"
    recipe_args = ["--vocab-size", str(DEFAULT_RECIPE["vocab_size"]),
                   "--init-std", str(DEFAULT_RECIPE["init_std"]),
                   "--seed", str(DEFAULT_RECIPE["seed"])]  # fmt: skip
    subprocess.run(
        [str(base_env.python), str(MAKE_MODELS), str(rebuilt), *recipe_args],
        check=True,
        capture_output=True,
    )
    cached = hash_tree(models.root)
    assert {"target/model.safetensors", "draft/model.safetensors"} <= set(cached)
    assert hash_tree(rebuilt) == cached


def test_tokenizer_vocab_equals_model_vocab(models):
    for kind in (*MODEL_KINDS, "draft"):
        model_dir = models.path(kind)
        config = json.loads((model_dir / "config.json").read_text())
        tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
        vocab = tokenizer["model"]["vocab"]
        assert config["vocab_size"] == len(vocab) == models.vocab_size
        assert sorted(vocab.values()) == list(range(models.vocab_size))
    draft = json.loads((models.draft / "config.json").read_text())
    assert draft["architectures"] == ["DFlashDraftModel"]
    assert draft["dflash_config"]["mask_token"] in vocab
    assert json.loads((models.target_bf16 / "config.json").read_text())["torch_dtype"] == "bfloat16"


def test_cpu_adapt_is_inert_without_the_flag():
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('probe_adapt', {str(CPU_ADAPT_FILE)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "hooked = any(isinstance(f, module.PatchingFinder) for f in sys.meta_path)\n"
        "print(hooked, 'torch' in sys.modules, any(m.startswith('sglang') for m in sys.modules))\n"
    )
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", probe], capture_output=True, text=True, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False"]


def make_patched_venv(base_env, venv: Path) -> Path:
    """Lay out a host-like venv (as _prepare_hostdir does) with ddtree 1.1.0 applied."""
    from ddtree_deploy.patchset.load import load_patchset
    from ddtree_deploy.patchset.materialize import materialize
    from ddtree_sandbox.hosts import make_host_venv

    site_packages = make_host_venv(venv, base_env)
    wheel = next(base_env.wheelhouse.glob(f"sglang-{base_env.sglang_version}-*.whl"))
    for item in materialize(load_patchset(PATCHSET_DIR), wheel):
        (site_packages / item.entry.path).write_bytes(item.result)
    return site_packages


PATCHED_PROBE = """
import sys, torch
import sglang.srt.speculative.dflash_worker as worker
from sglang.srt.speculative import ddtree_worker_utils, spec_utils
from sglang.srt.layers.attention import torch_native_backend
from sglang.srt.mem_cache import memory_pool
import ddtree_sandbox_cpu_adapt as adapt

consts = [c for c in worker.DFlashWorker.__init__.__code__.co_consts if isinstance(c, tuple)]
print("draft_backends", any("torch_native" in c for c in consts))
print("assign", spec_utils.assign_req_to_token_pool_func is adapt.assign_req_to_token_pool_torch)
print("ddtree_backends", "TorchNativeAttnBackend" in ddtree_worker_utils.DDTREE_MASK_BACKENDS)
print("verify", torch_native_backend.__ddtree_cpu_adapted__)
print("kv_copy", memory_pool.__ddtree_cpu_adapted__)
req_to_token = torch.zeros((3, 8), dtype=torch.int32)
adapt.assign_req_to_token_pool_torch(
    torch.tensor([2, 0]), req_to_token, torch.tensor([1, 3]), torch.tensor([3, 4]),
    torch.tensor([7, 8, 9]), 2)
print("assign_rows", req_to_token[2].tolist(), req_to_token[0].tolist())
tree = torch.tensor([[1, 0], [1, 1]], dtype=torch.bool)
flat = adapt.split_verify_masks(tree.flatten(), [3], 2, "cpu")[0]
print("nn_mask", flat.int().tolist())
"""


INERT_PROBE = (
    "import sys\n"
    f"adapt = sys.modules.get({MODULE_NAME!r})\n"
    "hooked = any(type(f).__name__ == 'PatchingFinder' for f in sys.meta_path)\n"
    "print(adapt is not None, hooked, 'torch' in sys.modules)\n"
)


def test_cpu_adapt_patches_sglang_in_a_host_venv(base_env, tmp_path):
    site_packages = make_patched_venv(base_env, tmp_path / "venv")
    assert (site_packages / PTH_NAME).read_text() == f"import {MODULE_NAME}\n"
    python = tmp_path / "venv" / "bin" / "python"
    env = clean_env(**{ENV_FLAG: "1", "SGLANG_USE_CPU_ENGINE": "1", "TMPDIR": str(tmp_path)})
    done = subprocess.run(
        [str(python), "-c", PATCHED_PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())
    assert lines["draft_backends"] == "True"
    assert lines["assign"] == "True"
    assert lines["ddtree_backends"] == "True"
    assert lines["verify"] == "adapt_torch_native_verify"
    assert lines["kv_copy"] == "adapt_kv_copy_warmup"
    assert lines["assign_rows"] == "[0, 7, 8, 0, 0, 0, 0, 0] [0, 0, 0, 9, 0, 0, 0, 0]"
    assert lines["nn_mask"] == "[[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]"

    inert = subprocess.run(
        [str(python), "-c", INERT_PROBE],
        capture_output=True, text=True, env=clean_env(), timeout=60,
    )  # fmt: skip
    assert inert.returncode == 0, inert.stderr
    assert inert.stdout.split() == ["True", "False", "False"]
