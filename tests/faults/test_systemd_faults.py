"""The fault matrix on a host whose server is a REAL systemd unit: the host is a container
of the sandbox's dockerd with systemd 252 as PID 1 (sandbox/ddtree_sandbox/systemd_host.py),
its sshd and `sglang.service` are systemd's units, and the push restarts the unit through
`systemctl`. The cells are the matrix's default ones with the same expectations, but for the
two whose fault is the stub's start plan (restart: the service refuses to start; health:
never ready): a unit's refusals are its own, and tests/pipeline/test_push_systemd.py crashes
the real unit at start (rolled back at the first restart, read from NRestarts) and ends the
wait on a fail line in its real journal. An SSH cut here kills the per-connection sshd
processes inside the container; a controller SIGKILL, a full disk (a tmpfs mounted inside
the container) and an immutable directory (chattr on the bind mount, from outside) are the
same faults the root matrix injects.
"""

from __future__ import annotations

import pytest

from tests.faults.hostside import FaultHost
from tests.faults.matrix import CELLS, Cell
from tests.faults.runner import run_cell
from tests.faults.test_matrix import assert_cell_ends_as_expected

pytestmark = [pytest.mark.hosts, pytest.mark.slow]
STUB_PLANNED = {("restart", "service_refuses"), ("health", "never_ready")}
UNIT_CELLS = [c for c in CELLS if c.default and (c.stage, c.fault) not in STUB_PLANNED]


@pytest.fixture
def unit_fault_host(sandbox_factory):
    fh = FaultHost(sandbox_factory(1, service_kind="systemd"))
    assert fh.is_unit_host and 'kind = "systemd"' in fh.sandbox.inventory_path.read_text()
    yield fh
    fh.clear_faults()


@pytest.mark.parametrize("cell", UNIT_CELLS, ids=[c.id for c in UNIT_CELLS])
def test_fault_cell_on_a_systemd_unit(unit_fault_host, tmp_path, cell: Cell):
    run = run_cell(unit_fault_host, cell, tmp_path)
    assert_cell_ends_as_expected(run, cell)
    if cell.lock_left:
        assert "locked by" in run.locked_push and "--break-lock" in run.locked_push
