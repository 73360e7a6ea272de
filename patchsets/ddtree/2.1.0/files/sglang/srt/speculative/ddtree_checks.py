"""What DDTREE on DFlashWorkerV2 refuses at start (patchset ddtree 2.1.0): pure, stdlib only.

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
    page_size: int,
    grammar_backend: str | None,
    attention_backend: str | None,
    device: str,
    cuda_graphs: bool,
    compact_draft_cache: bool,
    uses_selector: bool,
    uses_lilicorr: bool,
    uses_domino: bool,
) -> list[str]:
    """Return every start-up refusal for this configuration (empty: DDTREE can run)."""
    errors = []
    if budget < 1:
        errors.append(f"--speculative-ddtree-budget {budget}: must be >= 1")
    if budget + 1 > block_size and compact_draft_cache:
        errors.append(
            f"--speculative-ddtree-budget {budget} verifies {budget + 1} slots, wider than "
            f"the draft block ({block_size}), which a windowed draft KV "
            "(--speculative-draft-window-size) cannot follow: use a budget <= "
            f"{block_size - 1} or no draft window"
        )
    if tp_size != 1:
        errors.append(f"--tp-size {tp_size}: DDTREE builds trees from one rank's full logits")
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
