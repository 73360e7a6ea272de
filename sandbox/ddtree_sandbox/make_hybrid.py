"""Write the sandbox's tiny HYBRID target: Qwen3.5 text (Gated DeltaNet + gated attention).

Imported by ``make_models.py`` (run by the sandbox BASE ENV's python, never the controller).
``hybrid/`` is a ``Qwen3_5ForCausalLM`` (``model_type: qwen3_5_text``), the smallest
Qwen3-Next-style target sglang 0.5.23 serves through its hybrid linear-attention backend: 4
layers ``[linear, full, linear, full]`` (both ``layer_types`` and ``full_attention_interval: 2``
are set: sglang reads the interval), a dense MLP, hidden 64, 4 heads / 2 KV heads / head_dim
16, partial rotary 0.25, GDN 2 key / 4 value heads of 16, conv kernel 4, float32, untied head.
transformers builds it (so its parameter names are the ones both libraries load) and every
parameter is then drawn from one seeded generator in name order: N(0, std), except the norm
weights, which keep transformers' constant init. The DFlash draft of ``make_models`` (target
layers [1, 2], block 4) drafts for it as it does for the Qwen3 target.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "full_attention"]


def hybrid_config(vocab: dict[str, int], eos: int, pad: int) -> dict[str, object]:
    """Return the hybrid target's config.json content (see the module docstring)."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "vocab_size": len(vocab),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": len(LAYER_TYPES),
        "layer_types": LAYER_TYPES,
        "full_attention_interval": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "partial_rotary_factor": 0.25,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def write_hybrid(out_dir: Path, config: dict[str, object], std: float, seed: int) -> int:
    """Save the seeded hybrid target (safetensors, config.json) into ``out_dir``; return its
    parameter count."""
    torch.manual_seed(seed)  # transformers' own init, overwritten below except the norms
    model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**config)).to(torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if "norm" in name.rsplit(".", 2)[-2]:
                continue
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    for path in out_dir.iterdir():
        path.chmod(0o644)
    return sum(p.numel() for p in model.parameters())
