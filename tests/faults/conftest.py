"""A sandbox host prepared for fault injection; its faults are cleared at teardown. The
fleet's hosts (fleet_factory) serve the restart-group faults (test_group_faults.py), the
container bench (bench) the container watchdog's (test_container_watchdog.py)."""

from __future__ import annotations

import pytest

from tests.containers.conftest import bench
from tests.faults.hostside import FaultHost
from tests.fleet.conftest import fleet_factory

__all__ = ["bench", "fault_host", "fleet_factory"]


@pytest.fixture
def fault_host(sandbox_factory):
    fh = FaultHost(sandbox_factory(1))
    yield fh
    fh.clear_faults()
