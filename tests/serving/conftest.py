"""The real-server sandbox every test in tests/serving shares (package scope: one start
for the lossless and the gate tests; each test leaves the hosts as it found them)."""

from __future__ import annotations

import pytest

from ddtree_sandbox.broken import VARIANTS, build_broken_patchset
from ddtree_sandbox.gate_fixtures import GATE_VARIANTS, build_gate_patchset
from tests.serving.serving import DDTREE_110, Serving
from tests.support import copy_patchset


@pytest.fixture(scope="package")
def serving(base_env, tmp_path_factory):
    """Two real sglang hosts serving DFLASH (host0 target, host1 control) and the
    patchsets: ddtree 1.1.0, its broken variants, the gate fixtures."""
    from ddtree_sandbox import start_sandbox

    workdir = tmp_path_factory.mktemp("serving")
    sandbox = start_sandbox(
        workdir / "sandbox",
        2,
        first_octet=None,
        base_env=base_env,
        service="sglang",
        models=["target", "control"],
    )
    patchsets = workdir / "patchsets"
    copy_patchset(DDTREE_110, patchsets / "ddtree" / "1.1.0")
    for variant in VARIANTS:
        build_broken_patchset(DDTREE_110, patchsets, variant)
    for variant in GATE_VARIANTS:
        build_gate_patchset(DDTREE_110, patchsets, variant)
    state = Serving.record(sandbox, patchsets, workdir)
    yield state
    sandbox.stop()


@pytest.fixture(autouse=True)
def _hosts_back_at_baseline(serving):
    """After each test, a host it left on new code (it failed before its own rollback) is
    rolled back here: the next test's failure is then its own, not this one's."""
    yield
    serving.restore()
