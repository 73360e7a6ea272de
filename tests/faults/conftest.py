"""A sandbox host prepared for fault injection; its faults are cleared at teardown."""

from __future__ import annotations

import pytest

from tests.faults.hostside import FaultHost


@pytest.fixture
def fault_host(sandbox_factory):
    fh = FaultHost(sandbox_factory(1))
    yield fh
    fh.clear_faults()
