"""-q and -v/-vv on the command line (before or after the command name) reach the output:
a read of the temp host (tests/cli/temp_host.py) prints only its result table under -q,
the stage starts under -v, each event's details under -vv; -q with -v is refused."""

from __future__ import annotations

from tests.agent.conftest import MODULE
from tests.agent.test_drift_op import deploy
from tests.cli.temp_host import cli, inventory


def test_quiet_leaves_only_the_result(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    code, out, err = cli(inv, "backups", "list")
    assert code == 0 and "x status" in err  # control: progress lines by default
    code, out, err = cli(inv, "-q", "backups", "list")
    assert code == 0, err
    assert err == "" and "deploy id" in out  # the table (stdout: a read-only command's data)


def test_v_and_vv_add_starts_then_details(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    deploy(temp_host)
    (temp_host.site / MODULE).write_text("edited by hand\n")  # status reports it, with data
    _, _, normal = cli(inv, "status")
    _, _, starts = cli(inv, "status", "-v")
    _, _, details = cli(inv, "-vv", "status")
    assert "hand-edited since" in normal and "status     start" not in normal
    assert "status     start" in starts and '"drift": [' not in starts
    assert "status     start" in details and '"drift": [' in details


def test_quiet_with_verbose_is_refused(temp_host, tmp_path):
    code, _, err = cli(inventory(temp_host, tmp_path), "-q", "status", "-v")
    assert code == 2
    assert "give -q (quieter) or -v (more detail), not both" in err
