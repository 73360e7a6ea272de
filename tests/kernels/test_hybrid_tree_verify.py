"""The kernel-level proof under ddtree 2.2.0's hybrid path: sglang 0.5.23's Triton conv-update
and GDN recurrent verify kernels, given a tree's first-child/next-sibling links (what 2.2.0's
verify input carries), derive the parents and give every node exactly what a per-node torch
reference gives along its root-to-node path (interpreted, fp32); without the links (a chain
scan, what 2.1.x did) they do not: the negative control, in the same run."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.kernels.test_kernels import kernel_env
from tests.support import REPO

pytestmark = pytest.mark.kernels


def test_conv_and_gdn_tree_verify_equal_a_per_node_reference_and_a_chain_scan_does_not():
    python, env = kernel_env("0.5.23")
    done = subprocess.run(
        [str(python), "tests/kernels/hybrid_tree_verify.py"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["parents_ok"], record
    assert record["conv_tree_err"] < 1e-5 and record["gdn_tree_err"] < 1e-5, record
    assert record["conv_chain_err"] > 1e-2 and record["gdn_chain_err"] > 1e-2, record
