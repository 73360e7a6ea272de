"""The fault matrix through a `become` login: the host is reached as the unprivileged
`ddtree-deploy` user and the agent runs as root through `sudo -n` (tests/targets/
become_sandbox.py), where tests/faults/test_matrix.py logs in as root. The cells are the
matrix's default ones (one per stage: SSH cut, disk full, permission denied, compile error,
smoke failure, a refused start, a never-ready health, a controller SIGKILL) with the same
expectations: sudo between sshd and the agent must change none of them (an SSH cut or a
killed controller still leaves the agent to finish, the rollback still waits for it).
"""

from __future__ import annotations

import pytest

from tests.faults.hostside import HOLD_PYTHON, FaultHost
from tests.faults.matrix import CELLS, Cell
from tests.faults.runner import run_cell
from tests.faults.test_matrix import assert_cell_ends_as_expected
from tests.targets.become_sandbox import LOGIN_USER, start_become_sandbox, write_become_inventory

pytestmark = [pytest.mark.hosts, pytest.mark.slow]
BECOME_CELLS = [cell for cell in CELLS if cell.default]
# The login user may start the host's python and the hold stand-in (which runs the real
# python) as root, without a password: what a fleet's sudoers.d would say.
RULES = f"{LOGIN_USER} ALL=(root) NOPASSWD: /srv/venv/bin/python, {HOLD_PYTHON}\n"


@pytest.fixture
def become_fault_host(base_env):
    for sandbox in start_become_sandbox(base_env, {"host0": RULES}):
        fh = FaultHost(sandbox)
        write_become_inventory(sandbox, sandbox.inventory_path, {"host0": {"become": "sudo"}})
        yield fh
        fh.clear_faults()


@pytest.mark.parametrize("cell", BECOME_CELLS, ids=[c.id for c in BECOME_CELLS])
def test_fault_cell_through_become(become_fault_host, tmp_path, cell: Cell):
    inventory = become_fault_host.sandbox.inventory_path.read_text()
    assert f'user = "{LOGIN_USER}"' in inventory and 'become = "sudo"' in inventory
    assert_cell_ends_as_expected(run_cell(become_fault_host, cell, tmp_path), cell)
