"""The fault matrix (tests/faults/matrix.py) against real sshd hosts and real sglang files.

`make test` runs one cell per stage; `make faults` runs them all (the rest are slow).
"""

from __future__ import annotations

import pytest

from tests.faults.matrix import CELLS, Cell
from tests.faults.runner import CellRun, run_cell

pytestmark = pytest.mark.hosts
UNFINISHED = {"installing", "rollback_failed"}


def _param(cell: Cell):
    marks = [] if cell.default else [pytest.mark.slow]
    return pytest.param(cell, id=cell.id, marks=marks)


@pytest.mark.parametrize("cell", [_param(c) for c in CELLS])
def test_fault_cell(fault_host, tmp_path, cell: Cell):
    run = run_cell(fault_host, cell, tmp_path)
    assert_cell_ends_as_expected(run, cell)
    if cell.lock_left:
        assert "locked by" in run.locked_push and "--break-lock" in run.locked_push


def assert_cell_ends_as_expected(run: CellRun, cell: Cell) -> None:
    """The cell's exit code, journal and lock, the tree before or after (never between), the
    server running as the cell says; shared by the root and the `become` matrix."""
    said = run.stderr[-3000:]
    assert run.exit == cell.exit, said
    if cell.recover:
        assert run.journal_after_push[-1]["state"] in UNFINISHED, run.journal_after_push
        assert run.recover_exit == 0, said
    changed = sorted(p for p in set(run.digest) | set(run.expected)
                     if run.digest.get(p) != run.expected.get(p))  # fmt: skip
    assert not changed, f"tree is neither before nor after: {changed}\n{said}"
    assert run.running == cell.running, said
    states = [e["state"] for e in run.journal]
    assert not UNFINISHED & set(states[-1:]), states
    if run.journal:
        assert states[-1] == ("committed" if cell.end == "after" else "rolled_back"), states
    if cell.lock_left:
        assert run.lock is not None and run.locked_push.startswith("exit 4"), run.locked_push
    else:
        assert run.lock is None, (run.lock, said)
