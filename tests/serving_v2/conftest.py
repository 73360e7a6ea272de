"""The 0.5.23 real-server sandbox the tests in tests/serving_v2 share (package scope)."""

from __future__ import annotations

import pytest

from ddtree_sandbox.broken import V2_VARIANTS, build_broken_patchset
from tests.serving.serving import Serving
from tests.support import REPO, copy_patchset

DDTREE_210 = REPO / "patchsets" / "ddtree" / "2.1.0"


@pytest.fixture(scope="package")
def serving_v2(tmp_path_factory):
    """Two real sglang 0.5.23 hosts serving DFLASH with the overlap scheduler (host0 the
    target, host1 the control target) and the patchsets: ddtree 2.1.0, its broken variants."""
    from ddtree_sandbox import start_sandbox

    workdir = tmp_path_factory.mktemp("serving-v2")
    sandbox = start_sandbox(
        workdir / "sandbox",
        2,
        sglang_version="0.5.23",
        first_octet=None,
        service="sglang",
        models=["target", "control"],
    )
    patchsets = workdir / "patchsets"
    copy_patchset(DDTREE_210, patchsets / "ddtree" / "2.1.0")
    for variant in V2_VARIANTS:
        build_broken_patchset(DDTREE_210, patchsets, variant, V2_VARIANTS)
    state = Serving.record(sandbox, patchsets, workdir)
    state.dflash_accept = {}  # host -> DFLASH's accept length on the gate's prompts
    yield state
    sandbox.stop()


@pytest.fixture(autouse=True)
def _hosts_back_at_baseline(serving_v2):
    """After each test, a host it left on new code (it failed before its own rollback) is
    rolled back here: the next test's failure is then its own, not this one's."""
    yield
    serving_v2.restore()
