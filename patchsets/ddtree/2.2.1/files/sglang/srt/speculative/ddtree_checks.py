"""What DDTREE on DFlashWorkerV2 refuses at start (patchsets ddtree 2.1.x, 2.2.x): pure, stdlib only.

DDTreeWorkerV2 calls ``find_ddtree_v2_errors`` with the resolved server arguments and raises
one ValueError listing every refusal, so an operator fixes them all in one restart.
"""

from __future__ import annotations

# Attention backends whose TARGET_VERIFY reads DFlashVerifyInput.custom_mask (eager).
MASK_BACKENDS = ("triton", "flashinfer", "torch_native")


def find_ddtree_v2_errors(
    *,
    budget: int,
    block_size: int,
    tp_size: int,
    dp_attention: bool,
    dp_lm_head: bool,
    page_size: int,
    grammar_backend: str | None,
    attention_backend: str | None,
    device: str,
    cuda_graphs: bool,
    compact_draft_cache: bool,
    uses_selector: bool,
    uses_lilicorr: bool,
    uses_domino: bool,
    hybrid_target: str | None,
    radix_cache: bool,
    replayssm: bool,
) -> list[str]:
    """Return every start-up refusal for this configuration (empty: DDTREE can run).

    hybrid_target: what sglang's ``mambaish_config`` found in the target (e.g. "GDN
    (Qwen3_5TextConfig)"), None for a target with attention layers only. 2.2.0 serves GDN
    hybrid targets (the tree's links reach the conv and GDN verify kernels, the state commit
    takes the last accepted node's slot); what is not proved is refused: the other families,
    the radix cache (its mamba state tracking and extra buffer count chain positions) and
    ReplaySSM (its spec fold verifies a chain). 2.2.1 serves tp > 1 on attention-only
    targets (the draft's top-k gathered over the LM head's TP group, ddtree_tp.py); a hybrid
    target at tp > 1, DP attention and a DP LM head stay refused.
    """
    errors = []
    if hybrid_target is not None and not hybrid_target.startswith("GDN"):
        errors.append(
            f"hybrid target {hybrid_target}: DDTREE serves Gated DeltaNet hybrid targets "
            "only (Mamba2, KDA and Lightning tree verify is not proved)"
        )
    if hybrid_target is not None and radix_cache:
        errors.append(
            f"the radix cache with a hybrid target ({hybrid_target}): its mamba state "
            "tracking and extra buffer count chain positions, not tree nodes (launch with "
            "--disable-radix-cache)"
        )
    if hybrid_target is not None and replayssm:
        errors.append(
            f"--enable-linear-replayssm-spec with a hybrid target ({hybrid_target}): "
            "ReplaySSM verifies the draft as a chain"
        )
    if budget < 1:
        errors.append(f"--speculative-ddtree-budget {budget}: must be >= 1")
    if budget + 1 > block_size and compact_draft_cache:
        errors.append(
            f"--speculative-ddtree-budget {budget} verifies {budget + 1} slots, wider than "
            f"the draft block ({block_size}), which a windowed draft KV "
            "(--speculative-draft-window-size) cannot follow: use a budget <= "
            f"{block_size - 1} or no draft window"
        )
    if hybrid_target is not None and tp_size != 1:
        errors.append(
            f"--tp-size {tp_size} with a hybrid target ({hybrid_target}): the tree verify of "
            "the linear-attention state is proved at tp 1 only"
        )
    if tp_size != 1 and (dp_attention or dp_lm_head):
        errors.append(
            f"--tp-size {tp_size} with DP attention or --enable-dp-lm-head: DDTREE gathers the "
            "draft's top-k over the LM head's TP group, proved only for a plain TP group"
        )
    if page_size != 1:
        errors.append(f"--page-size {page_size}: DDTREE moves tree KV token by token (use 1)")
    if grammar_backend not in (None, "none"):
        errors.append(
            f"--grammar-backend {grammar_backend}: DDTREE does not constrain trees by a "
            "grammar yet (launch with --grammar-backend none)"
        )
    if attention_backend not in MASK_BACKENDS:
        errors.append(
            f"--attention-backend {attention_backend}: DDTREE needs a backend that applies the "
            f"tree mask in TARGET_VERIFY ({', '.join(MASK_BACKENDS)})"
        )
    if cuda_graphs and not device.startswith("cpu"):
        errors.append(
            "CUDA graphs: sglang captures DFlash-family verify graphs without a custom mask, "
            "so a replayed graph would verify the tree as a chain (launch with "
            "--disable-cuda-graph until ddtree captures its own)"
        )
    for flag, used in (
        ("a candidate selector", uses_selector),
        ("a LiLiCorr head", uses_lilicorr),
        ("Domino rollout", uses_domino),
    ):
        if used:
            errors.append(f"the draft model uses {flag}: DDTREE needs the plain DFlash head")
    return errors
