"""The hybrid real-server sandbox the tests in tests/serving_hybrid share (package scope).

One sshd host (host0) running a REAL sglang 0.5.23 server (CPU, fp32, overlap scheduler on) on
the sandbox's tiny Qwen3.5-text hybrid target (``make_hybrid.py``: Gated DeltaNet + gated
attention), serving it plain (no speculative decoding), so a push's lossless gate records its
references from the host's own plain server. The CPU adaptation for the GDN layers is the
sandbox's test fixture ``cpu_adapt_hybrid`` (sglang's Triton kernels, interpreted).
"""

from __future__ import annotations

import pytest

from tests.serving.serving import Serving, get_json
from tests.support import REPO, copy_patchset

DDTREE = REPO / "patchsets" / "ddtree"
VERSIONS = ("2.1.3",)  # copied into the sandbox's patchsets dir


class HybridServing(Serving):
    """Serving whose pristine host serves the hybrid target plain (no algorithm)."""

    def assert_pristine(self, name: str) -> None:
        host = self.host(name)
        assert self.serve_file(name) == self.pristine_serve[name]
        assert host.tree_digest() == self.pristine_tree[name]
        assert get_json(host, "/server_info")["speculative_algorithm"] is None


@pytest.fixture(scope="package")
def serving_hybrid(tmp_path_factory):
    from ddtree_sandbox import start_sandbox

    workdir = tmp_path_factory.mktemp("serving-hybrid")
    sandbox = start_sandbox(
        workdir / "sandbox",
        1,
        sglang_version="0.5.23",
        first_octet=None,
        service="sglang",
        models=["hybrid"],
        initial_algorithm=None,
    )
    patchsets = workdir / "patchsets"
    for version in VERSIONS:
        copy_patchset(DDTREE / version, patchsets / "ddtree" / version)
    state = HybridServing(sandbox, patchsets, workdir, pristine_serve={}, pristine_tree={})
    for host in sandbox.hosts:
        state.pristine_serve[host.name] = state.serve_file(host.name)
        state.pristine_tree[host.name] = host.tree_digest()
    yield state
    sandbox.stop()


@pytest.fixture(autouse=True)
def _hosts_back_at_baseline(serving_hybrid):
    """A host a failed test left on new code is rolled back before the next test."""
    yield
    serving_hybrid.restore()
