"""Fleet options are checked before any host is contacted (exit 2); an empty shard is a no-op."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from tests.support import REPO

# Addresses in TEST-NET-1: nothing answers there, so any connection attempt would hang/fail.
INVENTORY = """
[defaults]
connect_timeout_s = 1
[hosts.a]
address = "192.0.2.1"
[hosts.b]
address = "192.0.2.2"
"""


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "inv.toml"
    path.write_text(INVENTORY)
    return path


def invoke(*args: str):
    patchsets = str(REPO / "patchsets")
    return CliRunner().invoke(app, [*args, "--patchsets-dir", patchsets], catch_exceptions=False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shard", "3/2"], "--shard"),
        (["--shard", "x"], "--shard"),
        (["--batch", "0"], "--batch"),
        (["--batch", "1,200%"], "--batch"),
        (["--max-fail", "lots"], "--max-fail"),
    ],
)
def test_bad_fleet_options_exit_2_before_any_connection(inventory, extra, message):
    done = invoke("push", "-i", str(inventory), "--all", "-p", "ddtree@1.0.0", *extra)
    assert done.exit_code == 2, done.output
    assert message in done.output
    assert "preflight" not in done.output


def test_empty_shard_does_nothing_and_exits_0(inventory, tmp_path):
    summary = tmp_path / "summary.md"
    done = invoke(
        "push", "-i", str(inventory), "--all", "-p", "ddtree@1.0.0", "--shard", "3/3",
        "--summary-file", str(summary),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "no hosts selected" in done.output
    assert "no hosts" in summary.read_text()
