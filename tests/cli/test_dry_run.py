"""`rollback`, `recover` and `backups prune` with --dry-run say per host what they would
restore or delete and change nothing; `backups prune` asks first (--yes skips it, and a
script without --yes is refused). No sshd: the host is a temp dir whose REAL agent bundle
runs through the local transport (tests/agent/conftest.py), its deploys made by the agent's
own ops. Controls: the same commands without --dry-run do restore and delete."""

from __future__ import annotations

import json
import time

from ddtree_deploy.stages import op_builders as ops
from tests.agent.conftest import MODULE, MODULE_TEXT, PATCHED_TEXT, FakeHost
from tests.agent.test_drift_op import deploy
from tests.agent.test_ops_bundle import prepared
from tests.cli.temp_host import cli, inventory, state_of


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


def test_rollback_dry_run_names_the_backup_and_its_files_and_changes_nothing(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    deploy_id = deploy(temp_host)
    before = state_of(temp_host)
    code, out, err = cli(inv, "rollback", "--dry-run", "--no-restart")
    assert code == 0, err
    assert f"would restore backup {deploy_id}" in err
    assert "fakepkg/extra.py, fakepkg/mod.py" in err
    assert "(dry run)" in err and out == ""
    assert state_of(temp_host) == before
    assert not (temp_host.state / "lock").exists()
    # control: without --dry-run the backup is restored
    code, _, err = cli(inv, "rollback", "--no-restart")
    assert code == 0, err
    assert (temp_host.site / MODULE).read_text() == MODULE_TEXT


def test_rollback_dry_run_says_a_hand_edit_would_refuse_it(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    deploy(temp_host)
    (temp_host.site / MODULE).write_text(PATCHED_TEXT + "# hotfix\n")
    before = state_of(temp_host)
    code, _, err = cli(inv, "rollback", "--dry-run")
    assert code == 2, err
    assert "rollback would be refused: hand-edited since" in err and MODULE in err
    code, _, err = cli(inv, "rollback", "--dry-run", "--force", "--no-restart")
    assert code == 0, err
    assert f"would first save hand-edited {MODULE} beside the backup" in err
    assert state_of(temp_host) == before


def test_rollback_dry_run_with_nothing_to_roll_back(temp_host, tmp_path):
    code, _, err = cli(inventory(temp_host, tmp_path), "rollback", "--dry-run")
    assert code == 2 and "no committed deploy to roll back" in err


def test_rollback_dry_run_to_a_named_backup_and_an_unknown_one(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    code, _, err = cli(inv, "rollback", "--dry-run", "--to", DEPLOYS[0], "--no-restart")
    assert code == 0 and f"would restore backup {DEPLOYS[0]}" in err, err
    code, _, err = cli(inv, "rollback", "--dry-run", "--to", "20990101T000000Z-none")
    assert code == 2 and "no backup named '20990101T000000Z-none'" in err


def test_recover_dry_run(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    code, _, err = cli(inv, "recover", "--dry-run")
    assert code == 0 and "nothing to recover" in err, err
    deploy_id = "20260101T000000Z-d1"
    site = str(temp_host.site)
    answer = temp_host.call_ops(  # a push that died after its install: journal says installing
        ops.journal_op(deploy_id, "installing", run_id="dead"),
        ops.backup_op(deploy_id, site, prepared()),
        ops.install_op(site, prepared(), deploy_id),
    )
    assert answer.ok, answer
    before = state_of(temp_host)
    code, _, err = cli(inv, "recover", "--dry-run", "--no-restart")
    assert code == 0, err
    assert f"would restore backup {deploy_id}" in err and "fakepkg/mod.py" in err
    assert state_of(temp_host) == before
    # control: recover restores it
    code, _, err = cli(inv, "recover", "--no-restart")
    assert code == 0, err
    assert (temp_host.site / MODULE).read_text() == MODULE_TEXT


def test_prune_dry_run_names_what_would_go_and_deletes_nothing(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    before = state_of(temp_host)
    code, out, err = cli(inv, "backups", "prune", "--keep", "1", "--dry-run")
    assert code == 0, err
    assert f"would delete 2 backup(s): {DEPLOYS[0]}, {DEPLOYS[1]}; would keep 1" in err
    assert state_of(temp_host) == before and out == ""
    code, _, err = cli(inv, "backups", "prune", "--keep", "3", "--dry-run")
    assert code == 0 and "nothing to delete: 3 backup(s)" in err, err
    # control: the real prune deletes exactly what the dry run named
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", "--yes")
    assert code == 0, err
    assert backups(temp_host) == [DEPLOYS[2]]


def test_prune_without_a_terminal_needs_yes(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    code, _, err = cli(inv, "backups", "prune", "--keep", "1")
    assert code == 2
    assert "stdin is not a terminal to ask on: give --yes" in err and "--dry-run" in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert backups(temp_host) == DEPLOYS


def test_prune_asks_on_a_terminal_listing_the_hosts(temp_host, tmp_path, monkeypatch):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    monkeypatch.setattr("ddtree_deploy.cli.confirm.stdin_is_terminal", lambda: True)
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", stdin="n\n")
    assert code == 2 and "aborted: nothing changed" in err
    assert "backups prune will change 1 host(s)" in err and "hosts: x" in err
    assert backups(temp_host) == DEPLOYS
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", stdin="y\n")
    assert code == 0, err
    assert backups(temp_host) == [DEPLOYS[2]]


def test_prune_dry_run_spares_an_installing_deploy_as_the_prune_does(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    assert temp_host.call_ops(ops.journal_op(DEPLOYS[0], "installing")).ok
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", "--dry-run")
    assert code == 0 and f"would delete 1 backup(s): {DEPLOYS[1]}; would keep 2" in err, err
    code, _, err = cli(inv, "backups", "prune", "--keep", "1", "--yes")
    assert code == 0, err
    assert backups(temp_host) == [DEPLOYS[0], DEPLOYS[2]]


def held_lock(host: FakeHost, run_id: str = "aaaa") -> None:
    """A live run on another controller holds the host (as tests/faults/test_security.py)."""
    held = {"run_id": run_id, "holder": "alice@build-7 pid 4242", "pid": 4242,
            "controller": "build-7", "started": "2026-01-31T12:00:00+00:00",
            "expires_epoch": time.time() + 3600}  # fmt: skip
    lock = host.state / "lock"
    lock.write_text(json.dumps(held))
    lock.chmod(0o600)


def test_dry_runs_say_another_runs_lock_would_refuse_them(temp_host, tmp_path):
    inv = inventory(temp_host, tmp_path)
    three_deploys(temp_host)
    held_lock(temp_host)
    before = state_of(temp_host)
    for args in (["rollback"], ["backups", "prune", "--keep", "1"]):
        code, _, err = cli(inv, *args, "--dry-run")
        assert code == 4, (args, err)
        assert "would be refused: host locked by alice@build-7 pid 4242" in err
    code, _, err = cli(inv, "rollback", "--dry-run", "--break-lock", "--no-restart")
    assert code == 0 and "would restore backup" in err, err  # control: --break-lock would go
    assert state_of(temp_host) == before
