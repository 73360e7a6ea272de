"""`rollback`, `recover` and `backups prune` with --dry-run say per host what they would
restore or delete and change nothing; `backups prune` asks first (--yes skips it, and a
script without --yes is refused). No sshd: the host is a temp dir whose REAL agent bundle
runs through the local transport (tests/agent/conftest.py), its deploys made by the agent's
own ops. Controls: the same commands without --dry-run do restore and delete."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.stages import op_builders as ops
from tests.agent.conftest import MODULE, MODULE_TEXT, PATCHED_TEXT, FakeHost, start_fake_host
from tests.agent.test_drift_op import deploy
from tests.agent.test_ops_bundle import prepared


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    """The temp host, with an (empty) sglang distribution beside fakepkg: a real restore
    checks that the package the inventory names (sglang) is imported from the backup's
    site-packages."""
    for fake in start_fake_host(tmp_path, monkeypatch, sys.executable):
        (fake.site / "sglang").mkdir()
        (fake.site / "sglang" / "__init__.py").write_text("")
        info = fake.site / "sglang-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.0.1\n")
        (info / "RECORD").write_text("sglang/__init__.py,,\n")
        yield fake


def inventory(host: FakeHost, tmp_path: Path) -> Path:
    """An inventory naming the temp host `x` (local transport, the agent on this python)."""
    path = tmp_path / "inventory.toml"
    path.write_text(
        "[hosts.x]\n"
        'address = "local"\n'
        'transport = "local"\n'
        f"python = {json.dumps(sys.executable)}\n"
        f"state_dir = {json.dumps(str(host.state))}\n"
        '[hosts.x.service]\nkind = "none"\n'
    )
    return path


def cli(inv: Path, *args: str, stdin: str | None = None):
    """The command line against the temp host, in-process; (exit code, stdout, stderr)."""
    done = CliRunner().invoke(app, [*args, "-i", str(inv), "-H", "x"], input=stdin)
    return done.exit_code, done.stdout, done.stderr


def state_of(host: FakeHost) -> dict[str, str]:
    """Every file of the host's state dir and site-packages, with its bytes (a snapshot)."""
    found = {}
    for root in (host.state, host.site):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                found[str(path)] = path.read_bytes().hex()
    return found


def backups(host: FakeHost) -> list[str]:
    return sorted(p.name for p in (host.state / "backups").iterdir())


DEPLOYS = ["20260101T000000Z-d1", "20260102T000000Z-d2", "20260103T000000Z-d3"]


def three_deploys(host: FakeHost) -> None:
    """Three committed deploys, each rolled back but the last (so each has a backup)."""
    for deploy_id in DEPLOYS:
        deploy(host, deploy_id)
        if deploy_id != DEPLOYS[-1]:
            answer = host.call_ops(
                ops.restore_op(deploy_id, package="fakepkg"),
                ops.journal_op(deploy_id, "rolled_back"),
            )
            assert answer.ok, answer


def test_rollback_dry_run_names_the_backup_and_its_files_and_changes_nothing(host, tmp_path):
    inv = inventory(host, tmp_path)
    deploy_id = deploy(host)
    before = state_of(host)
    code, out, err = cli(inv, "rollback", "--dry-run", "--no-restart")
    assert code == 0, err
    assert f"would restore backup {deploy_id}" in err
    assert "fakepkg/extra.py, fakepkg/mod.py" in err
    assert "(dry run)" in err and out == ""
    assert state_of(host) == before
    assert not (host.state / "lock").exists()
    # control: without --dry-run the backup is restored
    code, _, err = cli(inv, "rollback", "--no-restart")
    assert code == 0, err
    assert (host.site / MODULE).read_text() == MODULE_TEXT


def test_rollback_dry_run_says_a_hand_edit_would_refuse_it(host, tmp_path):
    inv = inventory(host, tmp_path)
    deploy(host)
    (host.site / MODULE).write_text(PATCHED_TEXT + "# hotfix\n")
    before = state_of(host)
    code, _, err = cli(inv, "rollback", "--dry-run")
    assert code == 2, err
    assert "rollback would be refused: hand-edited since" in err and MODULE in err
    code, _, err = cli(inv, "rollback", "--dry-run", "--force", "--no-restart")
    assert code == 0, err
    assert f"would first save hand-edited {MODULE} beside the backup" in err
    assert state_of(host) == before


def test_rollback_dry_run_with_nothing_to_roll_back(host, tmp_path):
    code, _, err = cli(inventory(host, tmp_path), "rollback", "--dry-run")
    assert code == 2 and "no committed deploy to roll back" in err


def test_rollback_dry_run_to_a_named_backup_and_an_unknown_one(host, tmp_path):
    inv = inventory(host, tmp_path)
    three_deploys(host)
    code, _, err = cli(inv, "rollback", "--dry-run", "--to", DEPLOYS[0], "--no-restart")
    assert code == 0 and f"would restore backup {DEPLOYS[0]}" in err, err
    code, _, err = cli(inv, "rollback", "--dry-run", "--to", "20990101T000000Z-none")
    assert code == 2 and "no backup named '20990101T000000Z-none'" in err


def test_recover_dry_run(host, tmp_path):
    inv = inventory(host, tmp_path)
    code, _, err = cli(inv, "recover", "--dry-run")
    assert code == 0 and "nothing to recover" in err, err
    deploy_id = "20260101T000000Z-d1"
    site = str(host.site)
    answer = host.call_ops(  # a push that died after its install: journal says installing
        ops.journal_op(deploy_id, "installing", run_id="dead"),
        ops.backup_op(deploy_id, site, prepared()),
        ops.install_op(site, prepared(), deploy_id),
    )
    assert answer.ok, answer
    before = state_of(host)
    code, _, err = cli(inv, "recover", "--dry-run", "--no-restart")
    assert code == 0, err
    assert f"would restore backup {deploy_id}" in err and "fakepkg/mod.py" in err
    assert state_of(host) == before
    # control: recover restores it
    code, _, err = cli(inv, "recover", "--no-restart")
    assert code == 0, err
    assert (host.site / MODULE).read_text() == MODULE_TEXT


def test_prune_dry_run_names_what_would_go_and_deletes_nothing(host, tmp_path):
    inv = inventory(host, tmp_path)
    three_deploys(host)
    before = state_of(host)
    code, out, err = cli(inv, "backups", "prune", "--keep", "1", "--dry-run")
    assert code == 0, err
    assert f"would delete 2 backup(s): {DEPLOYS[0]}, {DEPLOYS[1]}; would keep 1" in err
    assert state_of(host) == before and out == ""
    code, _, err = cli(inv, "backups", "prune", "--keep", "3", "--dry-run")
    assert code == 0 and "nothing to delete: 3 backup(s)" in err, err
    # control: the real prune deletes exactly what the dry run named
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", "--yes")
    assert code == 0, err
    assert backups(host) == [DEPLOYS[2]]


def test_prune_without_a_terminal_needs_yes(host, tmp_path):
    inv = inventory(host, tmp_path)
    three_deploys(host)
    code, _, err = cli(inv, "backups", "prune", "--keep", "1")
    assert code == 2
    assert "stdin is not a terminal to ask on: give --yes" in err and "--dry-run" in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert backups(host) == DEPLOYS


def test_prune_asks_on_a_terminal_listing_the_hosts(host, tmp_path, monkeypatch):
    inv = inventory(host, tmp_path)
    three_deploys(host)
    monkeypatch.setattr("ddtree_deploy.cli.confirm.stdin_is_terminal", lambda: True)
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", stdin="n\n")
    assert code == 2 and "aborted: nothing changed" in err
    assert "backups prune will change 1 host(s)" in err and "hosts: x" in err
    assert backups(host) == DEPLOYS
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", stdin="y\n")
    assert code == 0, err
    assert backups(host) == [DEPLOYS[2]]
