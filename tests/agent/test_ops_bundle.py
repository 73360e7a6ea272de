"""Every agent op, run by the REAL bundle (bare `python -c` bootstrap, LocalTransport) on a
temp host: fake site-packages + state dir, no root, no sshd. The ops are built with the
controller's own builders (stages/op_builders.py) where one exists."""

from __future__ import annotations

import json
import os
import time

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import BackupResult, Facts, PlanResult
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.prepared import PreparedFile, PreparedPatchset
from tests.agent.conftest import (
    MODULE,
    MODULE_TEXT,
    NEW_FILE,
    NEW_TEXT,
    PACKAGE,
    PATCH,
    PATCHED_TEXT,
    VERSION,
    sha,
)

FILES = (
    PreparedFile(MODULE, "patch", PATCH.encode(), sha(MODULE_TEXT), sha(PATCHED_TEXT)),
    PreparedFile(NEW_FILE, "new", NEW_TEXT.encode(), None, sha(NEW_TEXT)),
)


def prepared(files=FILES, target=VERSION) -> PreparedPatchset:
    """fakepkg's patchset: mod.py patched, extra.py added."""
    return PreparedPatchset(f"fake@{VERSION}", "fake", VERSION, PACKAGE, target, files, (), (), 60)


def preflight(host, p=None, run_id="r1", break_lock=False):
    """facts + check_plan + lock_acquire, as a push's first request."""
    h = Host(name="x", address="local")
    p = p or prepared()
    return host.call_ops(
        ops.facts_op(h, p),
        ops.check_plan_op(p, run_id, break_lock),
        ops.lock_op(run_id, "tester", 60, break_lock, pid=1, controller="ctl"),
    )


def test_facts_find_the_distribution_its_record_and_the_state(fake_host):
    answer = fake_host.call(("facts", {"package": PACKAGE, "paths": [MODULE, NEW_FILE]}))
    facts = answer.facts()
    assert isinstance(facts, Facts), answer
    assert facts.package_version == VERSION
    assert facts.site_packages == str(fake_host.site)
    assert facts.files[MODULE].sha256 == sha(MODULE_TEXT) == facts.files[MODULE].record_sha256
    assert facts.files[NEW_FILE].sha256 is None
    assert facts.lock is None and facts.pending == [] and facts.backups == []
    assert facts.state_dir_free_bytes > 0 and facts.agent_pid > 0
    assert "unsafe" not in answer.results[0].data["files"][MODULE]  # shape kept: only when set
    missing = fake_host.call(("facts", {"package": "no-such-dist", "paths": [MODULE]})).facts()
    assert missing.package_version is None and missing.files[MODULE].sha256 is None


def test_a_push_walks_every_changing_op_then_rolls_back_byte_for_byte(fake_host):
    walk_a_push_and_roll_back(fake_host)


def test_the_bundle_runs_on_python_38(oldest_host):
    """The oldest host python the agent supports runs the same push and rollback."""
    assert oldest_host.call(("facts", {})).facts().python.startswith("3.8.")
    walk_a_push_and_roll_back(oldest_host)


def walk_a_push_and_roll_back(fake_host):
    """preflight, backup+journal, install+compile, no-changes re-preflight, restore."""
    site, p = fake_host.site, prepared()
    pre = preflight(fake_host)
    assert pre.ok, pre
    plan = pre.result_as("check_plan", PlanResult)
    assert plan.files == {MODULE: "pending", NEW_FILE: "pending"}  # absent = at its base
    backup = fake_host.call_ops(
        ops.backup_op("d1", str(site), p), ops.journal_op("d1", "installing", run_id="r1")
    )
    assert backup.ok, backup
    assert backup.result_as("backup", BackupResult).files == 2
    install = fake_host.call_ops(ops.install_op(str(site), p, "d1"), ops.compile_op(str(site), p))
    assert install.ok, install
    assert (site / MODULE).read_text() == PATCHED_TEXT and (site / NEW_FILE).read_text() == NEW_TEXT
    assert install.result("compile").data == {"compiled": 2}
    assert list((site / PACKAGE / "__pycache__").glob("mod.*.pyc"))
    assert preflight(fake_host).failed.code == Code.PENDING_RECOVERY  # still "installing"
    assert fake_host.call_ops(ops.journal_op("d1", "committed")).ok
    again = preflight(fake_host)  # nothing to do: halt, ok, before lock_acquire
    assert again.ok and again.halted.code == Code.NO_CHANGES, again
    assert [r.op for r in again.results] == ["facts", "check_plan"]
    restore = fake_host.call_ops(
        ops.restore_op("d1", package=PACKAGE), ops.journal_op("d1", "rolled_back")
    )
    assert restore.results[0].data["files"] == {MODULE: "restored", NEW_FILE: "restored"}
    assert restore.ok, restore
    assert (site / MODULE).read_text() == MODULE_TEXT and not (site / NEW_FILE).exists()
    assert not list((site / PACKAGE / "__pycache__").glob("mod.*.pyc"))
    release = fake_host.call_ops(ops.unlock_op("r1"))
    assert release.results[0].data == {"released": True}
    states = [e["state"] for e in fake_host.call(("facts", {})).facts().journal_tail]
    assert states == ["installing", "committed", "rolled_back"]


def test_check_plan_refusals_each_with_its_code(fake_host):
    site, state = fake_host.site, fake_host.state
    assert preflight(fake_host, prepared(target="2.0")).failed.code == Code.VERSION_MISMATCH
    (site / MODULE).write_text("someone else's edit\n")
    drift = preflight(fake_host)
    assert drift.failed.code == Code.DRIFT and drift.failed.data["files"][MODULE] == "drifted"
    (site / MODULE).write_text(MODULE_TEXT)
    (site / NEW_FILE).symlink_to("/etc/hostname")
    assert preflight(fake_host).failed.code == Code.UNSAFE_PATH
    (site / NEW_FILE).unlink()
    state.mkdir()
    (state / "journal.jsonl").write_text(json.dumps({"deploy_id": "d0", "state": "installing"}))
    assert preflight(fake_host).failed.code == Code.PENDING_RECOVERY
    (state / "journal.jsonl").unlink()
    lock = {"run_id": "other", "holder": "alice", "expires_epoch": time.time() + 600}
    (state / "lock").write_text(json.dumps(lock))
    locked = preflight(fake_host)
    assert locked.failed.op == "check_plan" and locked.failed.code == Code.LOCKED
    assert "alice" in locked.failed.error
    broken = preflight(fake_host, break_lock=True)  # --break-lock takes it over
    assert broken.ok, broken
    assert broken.result("lock_acquire").data["lock"]["replaced"]["holder"] == "alice"


def test_lock_acquire_and_release(fake_host):
    state = fake_host.state
    take = ops.lock_op("r1", "bob", 60, pid=7, controller="ctl")
    first = fake_host.call_ops(take)
    assert first.ok and first.results[0].data["lock"]["pid"] == 7
    assert oct((state / "lock").stat().st_mode & 0o777) == "0o600"
    assert fake_host.call_ops(take).results[0].data["reentered"] is True
    other = fake_host.call_ops(ops.lock_op("r2", "carol", 60, pid=8, controller="ctl"))
    assert other.failed.code == Code.LOCKED and "bob" in other.failed.error
    assert fake_host.call_ops(ops.unlock_op("r2")).results[0].data["released"] is False
    lock = json.loads((state / "lock").read_text())
    (state / "lock").write_text(json.dumps(dict(lock, expires_epoch=0)))  # expired
    assert fake_host.call_ops(ops.lock_op("r2", "carol", 60, pid=8, controller="ctl")).ok
    (state / "lock").write_text("not json")  # unreadable: counts as expired
    assert fake_host.call_ops(ops.lock_op("r3", "dave", 60, pid=8, controller="ctl")).ok


def test_install_refuses_before_writing_anything(fake_host):
    site, p = fake_host.site, prepared()
    bad_patch = PreparedFile(MODULE, "patch", PATCH.replace("41", "40").encode(),
                             sha(MODULE_TEXT), sha(PATCHED_TEXT))  # fmt: skip
    wrong_sha = PreparedFile(NEW_FILE, "new", NEW_TEXT.encode(), None, sha("other"))
    truncated = PreparedFile(MODULE, "patch", PATCH.rsplit("+", 1)[0].encode(),
                             sha(MODULE_TEXT), sha(PATCHED_TEXT))  # fmt: skip
    cases = [
        (prepared(files=(FILES[1], bad_patch)), Code.PATCH_FAILED, "does not apply"),
        (prepared(files=(FILES[0], wrong_sha)), Code.RESULT_MISMATCH, "result sha256"),
        (prepared(files=(truncated,)), Code.PATCH_FAILED, "truncated diff"),
    ]
    for case, code, text in cases:
        answer = fake_host.call_ops(ops.install_op(str(site), case))
        assert answer.failed.code == code and text in answer.failed.error, answer
        assert (site / MODULE).read_text() == MODULE_TEXT and not (site / NEW_FILE).exists()
    (site / MODULE).write_text("drifted\n")
    assert fake_host.call_ops(ops.install_op(str(site), p)).failed.code == Code.DRIFT
    no_backup = fake_host.call_ops(ops.install_op(str(site), p, "nope"))
    assert no_backup.failed.code == Code.BACKUP_CORRUPT


def test_backup_copies_are_verified_and_restore_reports_each_problem(fake_host):
    site, state, p = fake_host.site, fake_host.state, prepared()
    assert fake_host.call_ops(ops.backup_op("d1", str(site), p)).ok
    assert oct((state / "backups" / "d1").stat().st_mode & 0o777) == "0o700"
    copy = state / "backups" / "d1" / "files" / MODULE
    assert oct(copy.stat().st_mode & 0o777) == "0o600"
    assert fake_host.call_ops(ops.install_op(str(site), p, "d1")).ok
    copy.write_text("corrupted\n")
    corrupt = fake_host.call_ops(ops.install_op(str(site), p, "d1"))
    assert corrupt.failed.code == Code.BACKUP_CORRUPT, corrupt
    restore = fake_host.call_ops(ops.restore_op("d1", package=PACKAGE))
    assert restore.failed.code == Code.RESTORE_FAILED
    assert restore.failed.data["files"] == {MODULE: "backup copy corrupt", NEW_FILE: "restored"}
    assert fake_host.call_ops(ops.restore_op("nope", package=PACKAGE)).failed.code == Code.NO_BACKUP
    (state / "backups" / "d1" / "manifest.json").write_text("{")
    assert (
        fake_host.call_ops(ops.restore_op("d1", package=PACKAGE)).failed.code
        == Code.BACKUP_UNREADABLE
    )


def test_compile_reports_syntax_errors(fake_host):
    site = fake_host.site
    (site / NEW_FILE).write_text("def broken(:\n")
    answer = fake_host.call(("compile", {"site_packages": str(site), "paths": [NEW_FILE]}))
    assert answer.failed.code == Code.COMPILE_FAILED and NEW_FILE in answer.failed.data


def test_prune_keeps_the_newest_and_any_unfinished_deploy(fake_host):
    site, p = fake_host.site, prepared()
    for deploy_id in ("20260101T000000Z-a", "20260102T000000Z-b", "20260103T000000Z-c"):
        assert fake_host.call_ops(ops.backup_op(deploy_id, str(site), p)).ok
    assert fake_host.call_ops(ops.journal_op("20260101T000000Z-a", "installing")).ok
    pruned = fake_host.call_ops(ops.prune_op(1))
    assert pruned.results[0].data == {
        "removed": ["20260102T000000Z-b"],
        "kept": ["20260101T000000Z-a", "20260103T000000Z-c"],
    }
    assert sorted(os.listdir(fake_host.state / "backups")) == pruned.results[0].data["kept"]


def test_journal_stamps_entries_and_facts_read_them_back(fake_host):
    for state in ("installing", "committed"):
        assert fake_host.call_ops(ops.journal_op("d1", state, patchset="fake@1.0")).ok
    (fake_host.state / "journal.jsonl").open("a").write("garbage\n")
    facts = fake_host.call(("facts", {"journal_lines": 2})).facts()
    assert [e["state"] for e in facts.journal_tail] == ["committed", "corrupt"]
    assert facts.deploys[-1]["state"] == "committed" and facts.deploys[-1]["ts"]
    assert oct((fake_host.state / "journal.jsonl").stat().st_mode & 0o777) == "0o600"
