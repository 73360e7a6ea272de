"""Build and cache the sandbox's tiny local models (no hub access exists here).

``ensure_models(base_env)`` runs ``make_models.py`` with the base env's python (torch,
transformers) into ``<cache_dir>/models-<key12>/``: a temp dir renamed into place once
complete, then a ``ready`` marker, under the same flock as the base env builds. The key covers
the script's source, the recipe and the base env, so a change to any of them builds anew.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from ddtree_sandbox.baseenv import (
    BaseEnv,
    _build_lock,
    _is_ready,
    _remove_stale_temps,
    _run_quiet,
    _temp_build_dir,
    _write_ready,
)

MAKE_MODELS = Path(__file__).with_name("make_models.py")
MAKE_HYBRID = Path(__file__).with_name("make_hybrid.py")  # imported by make_models.py
# V=32 with init std 0.3: small enough that random drafts are often right, sharp enough that
# trees grow deep; docs/cpu-serving.md has the measurements behind the choice.
DEFAULT_RECIPE: dict[str, float | int] = {"vocab_size": 32, "init_std": 0.3, "seed": 0}
# Models a host can serve (the draft goes with any of them).
MODEL_KINDS = ("target", "target-bf16", "control", "hybrid")


@dataclass(frozen=True)
class ModelSet:
    """The five model dirs of one build, plus its key and recipe."""

    key: str
    root: Path
    target: Path  # Qwen3 target, float32, with its tokenizer
    target_bf16: Path  # same weights in bfloat16
    control: Path  # target with an all-zero lm_head: every argmax is token 0
    draft: Path  # DFlash draft (block size 4) for target, control and hybrid
    hybrid: Path  # Qwen3.5-text hybrid target (Gated DeltaNet + attention), float32
    vocab_size: int
    block_size: int

    def path(self, kind: str) -> Path:
        """Return the dir of ``kind`` (one of MODEL_KINDS or "draft"); raise ValueError."""
        if kind not in (*MODEL_KINDS, "draft"):
            raise ValueError(f"model kind must be one of {MODEL_KINDS} or 'draft', got {kind!r}")
        return self.root / kind


def compute_models_key(script_source: bytes, recipe: dict[str, float | int], base_key: str) -> str:
    """Return the 12-hex-digit cache key of a model build."""
    digest = hashlib.sha256(script_source)
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    digest.update(base_key.encode())
    return digest.hexdigest()[:12]


def ensure_models(base_env: BaseEnv, recipe: dict[str, float | int] | None = None) -> ModelSet:
    """Return the model set for ``recipe`` (default DEFAULT_RECIPE), building it if missing.

    A cold build takes about 10 s; later calls only check the ``ready`` marker. Raises
    ``SandboxBuildError`` when the script fails.
    """
    recipe = {**DEFAULT_RECIPE, **(recipe or {})}
    scripts = MAKE_MODELS.read_bytes() + MAKE_HYBRID.read_bytes()
    key = compute_models_key(scripts, recipe, base_env.key)
    root = base_env.cache_dir / f"models-{key}"
    models = ModelSet(
        key=key,
        root=root,
        target=root / "target",
        target_bf16=root / "target-bf16",
        control=root / "control",
        draft=root / "draft",
        hybrid=root / "hybrid",
        vocab_size=int(recipe["vocab_size"]),
        block_size=4,
    )
    if _is_ready(root):
        return models
    base_env.cache_dir.mkdir(parents=True, exist_ok=True)
    with _build_lock(base_env.cache_dir):
        _remove_stale_temps(base_env.cache_dir)
        if not _is_ready(root):
            _build_models(base_env, root, recipe)
    return models


def _build_models(base_env: BaseEnv, root: Path, recipe: dict[str, float | int]) -> None:
    started = time.monotonic()
    with _temp_build_dir(base_env.cache_dir, root) as tmp_dir:
        cmd = [str(base_env.python), str(MAKE_MODELS), str(tmp_dir)]
        cmd += ["--vocab-size", str(recipe["vocab_size"]), "--init-std", str(recipe["init_std"])]
        cmd += ["--seed", str(recipe["seed"])]
        _run_quiet(cmd)
        payload = {"kind": "models", "base": base_env.key, "recipe": recipe,
                   "timings_s": {"total_s": time.monotonic() - started}}  # fmt: skip
        _write_ready(tmp_dir, payload)
