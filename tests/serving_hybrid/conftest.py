"""The hybrid real-server sandbox the tests in tests/serving_hybrid share (package scope).

One sshd host (host0) running a REAL sglang 0.5.23 server (CPU, fp32, overlap scheduler on) on
the sandbox's tiny Qwen3.5-text hybrid target (``make_hybrid.py``: Gated DeltaNet + gated
attention), serving it plain (no speculative decoding), so a push's lossless gate records its
references from the host's own plain server. The CPU adaptation for the GDN layers is the
sandbox's test fixture ``cpu_adapt_hybrid`` (sglang's Triton kernels, interpreted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ddtree_sandbox.broken import HYBRID_VARIANTS, build_broken_patchset
from tests.serving.serving import PlainServing
from tests.support import REPO, copy_patchset

DDTREE = REPO / "patchsets" / "ddtree"
# Each copied into the sandbox's patchsets dir with a shorter lossless gate (CI time: the
# interpreted GDN kernels make ~0.2 s a token on 2 busy cores): version -> (prompts, tokens).
# 2.1.3 never serves here (refused at start): its gate's plain references are all it costs.
# make test runs 2.2.1 (the lossless run) and stock 2.1.2 (the control) on shorter gates than
# the 8 x 32 that 2.2.0's serving_full runs prove: stock 2.1.2 first differs at prompt 2,
# token 6 (docs/ddtree.md), well inside 4 x 16.
TRIMMED = {"2.1.3": (1, 4), "2.1.2": (4, 16), "2.2.0": (8, 32), "2.2.1": (4, 24)}


def trim_lossless(root: Path, prompts: int, tokens: int) -> None:
    """Keep the first ``prompts`` of the copy's [lossless] prompts and ``tokens`` new tokens
    each, at most ``prompts`` requests in flight, then re-lock the copy (the repository's
    versions are never touched)."""
    from ddtree_deploy.patchset import load_patchset, write_lock

    spec = root / "patchset.toml"
    text = re.sub(r"(?m)^max_new_tokens = \d+$", f"max_new_tokens = {tokens}", spec.read_text())
    flight = min(prompts, 8)
    text = re.sub(
        r"(?m)^concurrency = (\d+)$", lambda m: f"concurrency = {min(flight, int(m[1]))}", text
    )
    head, _, tail = text.partition("prompts = [\n")
    lines = tail.splitlines(keepends=True)
    kept = [line for line in lines if line.lstrip().startswith("{ input_ids")][:prompts]
    rest = lines[[i for i, line in enumerate(lines) if line.startswith("]")][0] :]
    spec.write_text(head + "prompts = [\n" + "".join(kept) + "".join(rest))
    write_lock(load_patchset(root), replace=True)  # a copy never pushed: re-locked


DFLASH_PROBE = "sglang/srt/speculative/sandbox_dflash_probe.py"


def write_dflash_patchset(patchsets: Path, like: Path) -> str:
    """A test-only patchset that switches the host to DFLASH (one new, inert module: a
    patchset ships at least one file) with ``like``'s [lossless] gate, so a push proves
    DFLASH == the host's plain greedy server through the gate itself. Returns its ref."""
    from ddtree_deploy.patchset import load_patchset, write_lock

    root = patchsets / "dflash-probe" / "0.5.23"
    (root / "files" / DFLASH_PROBE).parent.mkdir(parents=True)
    (root / "files" / DFLASH_PROBE).write_text(
        '"""Sandbox test fixture: marks a DFLASH probe push."""\n'
    )
    # like's gate, but no reference files: the host's plain server gives the references
    lossless = re.sub(
        r"(?ms)^references = \[.*?^\]\n", "", like.read_text().partition("[lossless]")[2]
    )
    (root / "patchset.toml").write_text(
        'name = "dflash-probe"\nversion = "0.5.23"\n'
        'description = "test fixture: serve DFLASH (sglang\'s own) to compare it with plain"\n\n'
        '[target]\npackage = "sglang"\nversion = "0.5.23"\n\n'
        f'[[file]]\npath = "{DFLASH_PROBE}"\nnew = "files/{DFLASH_PROBE}"\n\n'
        '[smoke]\nsuites = ["integrity", "compile"]\nafter_restart = ["server"]\n\n'
        '[serve]\nargs = ["--speculative-algorithm", "DFLASH"]\n\n[lossless]' + lossless
    )
    write_lock(load_patchset(root))
    return "dflash-probe@0.5.23"


def start_plain_0523_host(workdir: Path, trimmed: dict[str, tuple[int, int]], **start: Any):
    """One real sglang 0.5.23 host serving plain (``start``: more start_sandbox arguments)
    and workdir/patchsets holding the ddtree versions of ``trimmed``, each trimmed to its
    (prompts, tokens). Returns (sandbox, patchsets)."""
    from ddtree_sandbox import start_sandbox

    sandbox = start_sandbox(
        workdir / "sandbox", 1, sglang_version="0.5.23", first_octet=None, service="sglang",
        initial_algorithm=None, **start,
    )  # fmt: skip
    patchsets = workdir / "patchsets"
    for version, (prompts, tokens) in trimmed.items():
        root = copy_patchset(DDTREE / version, patchsets / "ddtree" / version)
        trim_lossless(root, prompts, tokens)
    return sandbox, patchsets


@pytest.fixture(scope="package")
def serving_hybrid(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("serving-hybrid")
    sandbox, patchsets = start_plain_0523_host(workdir, TRIMMED, models=["hybrid"])
    for variant in HYBRID_VARIANTS:
        ref = build_broken_patchset(
            patchsets / "ddtree" / "2.2.0", patchsets, variant, HYBRID_VARIANTS
        )
        trim_lossless(patchsets / "ddtree" / ref.split("@")[1], 8, 32)
    write_dflash_patchset(patchsets, patchsets / "ddtree" / "2.2.1" / "patchset.toml")
    state = PlainServing.record(sandbox, patchsets, workdir)
    yield state
    sandbox.stop()


@pytest.fixture(autouse=True)
def _hosts_back_at_baseline(serving_hybrid):
    """A host a failed test left on new code is rolled back before the next test."""
    yield
    serving_hybrid.restore()
