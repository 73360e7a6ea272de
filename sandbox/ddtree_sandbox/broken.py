"""Deliberately broken DDTree versions: negative controls for the serving gates.

Each variant is ddtree 1.1.0 with one small, realistic bug, re-versioned and re-locked so
the push's local gate accepts it; only a gate that watches real decoding can catch it:

- ``mask``: the tree attention mask is dropped — verify runs causal over the tree slots,
  so a node also sees its earlier siblings (lossless check must fail).
- ``walk``: the node tokens the walk matches against the target's are shifted by one
  slot, so it accepts the child whose NEIGHBOUR carries the target's token: the committed
  token is right, the kept KV is the wrong child's (lossless check must fail). A bug inside
  the walk function itself (ddtree_utils) is caught earlier, by the `ddtree` smoke suite; one
  that only loses acceptance (child/sibling links swapped: accept length 1.02 instead of 1.12)
  passes a lossless gate by design.
- ``kv``: the kept KV slots are off by one verify row, so the cache of the committed path
  holds its neighbours' keys and values (lossless check must fail).
- ``crash``: the worker raises while starting (health must fail).

``V2_VARIANTS`` do the same to ddtree 2.1.0 (sglang 0.5.23, DDTreeWorkerV2):

- ``mask``: the tree mask becomes a causal one over the verify slots (lossless must fail).
- ``kv``: the accepted path's KV is left where verify wrote it, not moved to the window's
  front, so later steps attend to the wrong slots (lossless must fail).

``HYBRID_VARIANTS`` break ddtree 2.2.0's hybrid (GDN) path, each half of the fix undone
(ddtree 2.1.2 is both halves undone):

- ``chain-commit``: tree parents in the verify, but the recurrent state of the chain position
  ``commit_len - 1`` is committed instead of the last accepted node's (lossless must fail).
- ``chain-scan``: the verify input carries no tree links, so the conv and GDN verify scan the
  slots as a chain; the commit takes the last accepted node's slot (lossless must fail).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SPECULATIVE = "files/sglang/srt/speculative"


@dataclass(frozen=True)
class BrokenVariant:
    """One bug: in file ``rel`` (under the patchset dir) ``old`` becomes ``new``."""

    version: str
    rel: str
    old: str
    new: str
    what: str


VARIANTS: dict[str, BrokenVariant] = {
    "mask": BrokenVariant(
        "1.1.1",
        f"{SPECULATIVE}/ddtree_info.py",
        "build_ddtree_custom_mask(\n            self.tree.tree_mask,",
        "build_ddtree_custom_mask(\n            torch.ones_like(self.tree.tree_mask).tril(),",
        "tree mask dropped: verify runs causal",
    ),
    "walk": BrokenVariant(
        "1.1.2",
        f"{SPECULATIVE}/ddtree_worker_utils.py",
        "walk_tokens[b, :size] = tree.input_ids",
        "walk_tokens[b, 1:size] = tree.input_ids[: size - 1]",
        "the walk's node tokens are off by one slot: it picks the wrong child",
    ),
    "kv": BrokenVariant(
        "1.1.3",
        f"{SPECULATIVE}/ddtree_worker_utils.py",
        "return (base + accept_index)[keep]",
        "return (base + (accept_index + 1).clamp(max=width - 1))[keep]",
        "KV keep/free off by one verify row",
    ),
    "crash": BrokenVariant(
        "1.1.4",
        f"{SPECULATIVE}/ddtree_info.py",
        '    if errors:\n        raise ValueError("DDTREE cannot run',
        '    errors.append("deliberately broken build")\n'
        '    if errors:\n        raise ValueError("DDTREE cannot run',
        "the DDTREE worker refuses to start",
    ),
}


V2_WORKER = f"{SPECULATIVE}/ddtree_worker_v2.py"
V2_VARIANTS: dict[str, BrokenVariant] = {
    "mask": BrokenVariant(
        "2.9.1",
        V2_WORKER,
        "build_ddtree_custom_mask(step.layout.tree_mask,",
        "build_ddtree_custom_mask(torch.ones_like(step.layout.tree_mask).tril(),",
        "tree mask dropped: verify runs causal",
    ),
    "kv": BrokenVariant(
        "2.9.2",
        V2_WORKER,
        "accepted = (local[:, 1:] >= 0).sum(dim=1)",
        "accepted = (local[:, 1:] >= 0).sum(dim=1) * 0",
        "the accepted path's KV is not moved to the window's front",
    ),
}


def build_broken_patchset(
    source: Path, out_base: Path, variant: str, variants: dict[str, BrokenVariant] = VARIANTS
) -> str:
    """Copy the ddtree version at ``source`` (1.1.0, 2.1.0 with ``V2_VARIANTS``, 2.2.0 with
    ``HYBRID_VARIANTS``) to
    ``out_base/ddtree/<version>`` with one bug, lock it.

    Returns the ref (``ddtree@1.1.x``). Raises ValueError when the text to break is not in
    the source (the variant no longer matches the code it was written against).
    """
    from ddtree_deploy.patchset import load_patchset, write_lock

    bug = variants[variant]
    root = copy_with_edits(source, out_base, bug.version, [(bug.rel, bug.old, bug.new)], variant)
    write_lock(load_patchset(root))
    return f"ddtree@{bug.version}"


def copy_with_edits(
    source: Path,
    out_base: Path,
    version: str,
    edits: Sequence[tuple[str, str, str]],
    variant: str,
) -> Path:
    """Copy the patchset at ``source`` to ``out_base/ddtree/<version>``, re-versioned, with
    each ``(rel, old, new)`` of ``edits`` applied in order; return the copy's dir (unlocked).

    Raises ValueError when an ``old`` text is not in its file exactly once (``variant``
    names the variant in the message).
    """
    from ddtree_deploy.patchset import copy_version, load_patchset

    root = out_base / "ddtree" / version
    shutil.rmtree(root, ignore_errors=True)
    # every file its own (shared ones too), so an edit below changes this copy only
    copy_version(load_patchset(source), root, own_files=True, lock=False)
    spec = root / "patchset.toml"
    text = spec.read_text()
    source_version = load_patchset(source).spec.version
    spec.write_text(text.replace(f'version = "{source_version}"', f'version = "{version}"', 1))
    for rel, old, new in edits:
        target = root / rel
        code = target.read_text()
        if code.count(old) != 1:
            raise ValueError(f"{target}: the text variant {variant!r} changes is not there once")
        target.write_text(code.replace(old, new))
    return root


HYBRID_VARIANTS: dict[str, BrokenVariant] = {
    "chain-commit": BrokenVariant(
        "2.9.3",
        V2_WORKER,
        "        return last.to(torch.int64)\n",
        "        return super()._mamba_commit_steps(commit_lens)\n",
        "tree parents, chain commit: the state of slot commit_len - 1 is kept",
    ),
    "chain-scan": BrokenVariant(
        "2.9.4",
        V2_WORKER,
        "        verify_input.retrieve_next_token = step.layout.next_token\n"
        "        verify_input.retrieve_next_sibling = step.layout.next_sibling\n",
        "        return\n",
        "no tree links: the hybrid verify scans the slots as a chain (tree commit kept)",
    ),
}
