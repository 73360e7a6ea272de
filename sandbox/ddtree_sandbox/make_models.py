"""Write the sandbox's tiny seeded models: Qwen3 target, bf16 twin, control, DFlash draft.

Run by the sandbox BASE ENV's python (torch, transformers, tokenizers, safetensors), never by
the controller: ``python make_models.py OUT_DIR [--vocab-size 32 --init-std 0.3 --seed 0]``.
Writes into OUT_DIR:

- ``target/``: a Qwen3ForCausalLM (hidden 64, 4 layers, 4 heads, 2 KV heads, head_dim 16,
  untied lm_head), float32, plus a WordLevel tokenizer whose vocab is exactly the model's.
- ``target-bf16/``: the same weights stored as bfloat16, config dtype bfloat16.
- ``control/``: the target made to answer token 0 (a plain word) at every step, AND make the
  draft sure of it: one hidden dimension (``CONTROL_DIM``) of every token embedding is raised
  by ``CONTROL_OFFSET``, which keeps that dimension positive through the residual streams of
  target and draft, and the lm_head is zero except ``lm_head[0, CONTROL_DIM] = 1``. So token
  0's logit is the largest and clearly so, for the target and for the draft (which reuses the
  target's embedding and head): drafts are right at every depth and a DDTree grows a deep
  path of token 0 (an all-zero head would make the draft's logits flat, its tree a star, and
  the right token one sibling among many).
- ``draft/``: a complete DFlash draft checkpoint (2 layers, block size 4) for either target.
- ``hybrid/``: a Qwen3.5-text hybrid target (Gated DeltaNet + attention, ``make_hybrid.py``),
  same vocabulary and tokenizer; the same draft drafts for it.
- ``recipe.json``: the parameters used.

Every tensor comes from one seeded ``torch.Generator`` in a fixed order and every JSON file is
written with sorted keys, so two builds give byte-identical files. Prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from make_hybrid import hybrid_config, write_hybrid  # a sibling script (sys.path[0])
from safetensors.torch import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast

HIDDEN = 64
INTERMEDIATE = 128
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
TARGET_LAYERS = 4
DRAFT_LAYERS = 2
BLOCK_SIZE = 4
TARGET_LAYER_IDS = [1, 2]
MAX_POSITIONS = 2048
# The control target (control_tensors): the hidden dimension that carries "token 0", and how
# far its embedding is raised: far beyond what 4 layers can add (each adds tens at std 0.3).
CONTROL_DIM = 0
CONTROL_OFFSET = 1000.0
ROPE_THETA = 10000.0
RMS_EPS = 1e-6

EOS, PAD, MASK, UNK = "<|endoftext|>", "<|pad|>", "<|MASK|>", "<unk>"
# Specials go last so token 0 (the control target's only output) is a plain word, not eos.
SPECIALS = [UNK, MASK, PAD, EOS]
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu zero one two "
    "three four five six seven eight nine red green blue cyan amber olive coral ivory slate "
    "umber pearl ruby jade onyx opal gold iron lead zinc tin neon argon"
).split()
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_vocab(vocab_size: int) -> dict[str, int]:
    """Return token -> id: ``vocab_size - 4`` plain words, then unk, mask, pad, eos."""
    words = vocab_size - len(SPECIALS)
    if not 1 <= words <= len(WORDS):
        raise ValueError(f"vocab size must be in [{len(SPECIALS) + 1}, {len(WORDS) + 4}]")
    return {token: i for i, token in enumerate(WORDS[:words] + SPECIALS)}


def write_tokenizer(out_dir: Path, vocab: dict[str, int]) -> None:
    """Save a WordLevel tokenizer (whitespace split) wrapped as PreTrainedTokenizerFast."""
    core = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[MASK],
        model_max_length=MAX_POSITIONS,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(out_dir))


def target_config(vocab: dict[str, int], dtype: str) -> dict[str, object]:
    """Return the Qwen3 target's config.json content."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": len(vocab),
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": TARGET_LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "bos_token_id": vocab[EOS],
        "eos_token_id": vocab[EOS],
        "pad_token_id": vocab[PAD],
        "torch_dtype": dtype,
        "dtype": dtype,
    }


def draft_config(vocab: dict[str, int]) -> dict[str, object]:
    """Return the DFlash draft's config.json content (model_type qwen3, 2 layers)."""
    config = target_config(vocab, "float32")
    config.update(
        architectures=["DFlashDraftModel"],
        num_hidden_layers=DRAFT_LAYERS,
        block_size=BLOCK_SIZE,
        num_target_layers=TARGET_LAYERS,
        dflash_config={
            "target_layer_ids": TARGET_LAYER_IDS,
            "mask_token": MASK,
            "block_size": BLOCK_SIZE,
        },
    )
    return config


def layer_shapes(prefix: str) -> list[tuple[str, tuple[int, ...], str]]:
    """Return (name, shape, kind) of one Qwen3 decoder layer; kind is 'normal' or 'ones'."""
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return [
        (f"{prefix}.self_attn.q_proj.weight", (q_dim, HIDDEN), "normal"),
        (f"{prefix}.self_attn.k_proj.weight", (kv_dim, HIDDEN), "normal"),
        (f"{prefix}.self_attn.v_proj.weight", (kv_dim, HIDDEN), "normal"),
        (f"{prefix}.self_attn.o_proj.weight", (HIDDEN, q_dim), "normal"),
        (f"{prefix}.self_attn.q_norm.weight", (HEAD_DIM,), "ones"),
        (f"{prefix}.self_attn.k_norm.weight", (HEAD_DIM,), "ones"),
        (f"{prefix}.input_layernorm.weight", (HIDDEN,), "ones"),
        (f"{prefix}.post_attention_layernorm.weight", (HIDDEN,), "ones"),
        (f"{prefix}.mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN), "normal"),
        (f"{prefix}.mlp.up_proj.weight", (INTERMEDIATE, HIDDEN), "normal"),
        (f"{prefix}.mlp.down_proj.weight", (HIDDEN, INTERMEDIATE), "normal"),
    ]


def target_shapes(vocab_size: int) -> list[tuple[str, tuple[int, ...], str]]:
    """Return every tensor of the target, in generation order."""
    shapes = [("model.embed_tokens.weight", (vocab_size, HIDDEN), "normal")]
    for i in range(TARGET_LAYERS):
        shapes += layer_shapes(f"model.layers.{i}")
    shapes += [("model.norm.weight", (HIDDEN,), "ones")]
    shapes += [("lm_head.weight", (vocab_size, HIDDEN), "normal")]
    return shapes


def draft_shapes() -> list[tuple[str, tuple[int, ...], str]]:
    """Return every tensor of the draft (no embedding or lm_head: it reuses the target's)."""
    shapes = []
    for i in range(DRAFT_LAYERS):
        shapes += layer_shapes(f"layers.{i}")
    shapes += [
        ("norm.weight", (HIDDEN,), "ones"),
        ("hidden_norm.weight", (HIDDEN,), "ones"),
        ("fc.weight", (HIDDEN, len(TARGET_LAYER_IDS) * HIDDEN), "normal"),
    ]
    return shapes


def generate_tensors(
    shapes: list[tuple[str, tuple[int, ...], str]], generator: torch.Generator, std: float
) -> dict[str, torch.Tensor]:
    """Return float32 tensors: N(0, std) for 'normal' (drawn in list order), 1.0 for 'ones'."""
    tensors = {}
    for name, shape, kind in shapes:
        if kind == "ones":
            tensors[name] = torch.ones(shape, dtype=torch.float32)
        else:
            tensors[name] = torch.randn(shape, generator=generator, dtype=torch.float32) * std
    return tensors


def write_checkpoint(
    out_dir: Path, config: dict[str, object], tensors: dict[str, torch.Tensor]
) -> None:
    """Write config.json (sorted keys) and model.safetensors (contiguous tensors)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    contiguous = {name: tensor.contiguous() for name, tensor in sorted(tensors.items())}
    weights = out_dir / "model.safetensors"
    save_file(contiguous, str(weights), metadata={"format": "pt"})
    weights.chmod(0o644)  # safetensors writes 0600; hosts may read as another user


def control_tensors(target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Return the control target's tensors (see the module docstring): always token 0."""
    embed = target["model.embed_tokens.weight"].clone()
    embed[:, CONTROL_DIM] += CONTROL_OFFSET
    head = torch.zeros_like(target["lm_head.weight"])
    head[0, CONTROL_DIM] = 1.0
    return {**target, "model.embed_tokens.weight": embed, "lm_head.weight": head}


def build_models(out_dir: Path, vocab_size: int, init_std: float, seed: int) -> dict[str, object]:
    """Write target, target-bf16, control and draft into ``out_dir``; return a summary."""
    vocab = build_vocab(vocab_size)
    generator = torch.Generator().manual_seed(seed)
    target = generate_tensors(target_shapes(vocab_size), generator, init_std)
    draft = generate_tensors(draft_shapes(), generator, init_std)
    as_bf16 = {name: tensor.to(torch.bfloat16) for name, tensor in target.items()}
    variants = {
        "target": ("float32", target),
        "target-bf16": ("bfloat16", as_bf16),
        "control": ("float32", control_tensors(target)),
    }
    for name, (dtype, tensors) in variants.items():
        write_checkpoint(out_dir / name, target_config(vocab, dtype), tensors)
        write_tokenizer(out_dir / name, vocab)
    write_checkpoint(out_dir / "draft", draft_config(vocab), draft)
    write_tokenizer(out_dir / "draft", vocab)
    # last, from its own generator: the models above stay byte for byte what they were
    config = hybrid_config(vocab, vocab[EOS], vocab[PAD])
    write_hybrid(out_dir / "hybrid", config, init_std, seed)
    write_tokenizer(out_dir / "hybrid", vocab)
    recipe = {"vocab_size": vocab_size, "init_std": init_std, "seed": seed,
              "block_size": BLOCK_SIZE, "mask_token": MASK, "eos_token_id": vocab[EOS],
              "mask_token_id": vocab[MASK]}  # fmt: skip
    (out_dir / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n")
    return recipe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--vocab-size", type=int, default=32)
    parser.add_argument("--init-std", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.use_deterministic_algorithms(True)
    recipe = build_models(args.out_dir, args.vocab_size, args.init_std, args.seed)
    json.dump(recipe, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
