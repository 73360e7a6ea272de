"""The agent's hand-edit check (agent/host/drift.py) on a temp-dir host running the real
bundle: restore refuses a file changed since the deploy, --force keeps its bytes first, a
later deploy's bytes are no hand edit, an old backup without result hashes is unchecked,
and the drift op reports what status shows."""

from __future__ import annotations

import json

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.stages import op_builders as ops
from tests.agent.conftest import (
    MODULE,
    MODULE_TEXT,
    NEW_FILE,
    NEW_TEXT,
    PACKAGE,
    PATCHED_TEXT,
    sha,
)
from tests.agent.test_ops_bundle import prepared


def deploy(fake_host, deploy_id="20260101T000000Z-d1"):
    """Back up, install and journal one deploy of the fake patchset (committed)."""
    site, p = str(fake_host.site), prepared()
    answer = fake_host.call_ops(
        ops.backup_op(deploy_id, site, p),
        ops.install_op(site, p, deploy_id),
        ops.journal_op(deploy_id, "committed"),
    )
    assert answer.ok, answer
    return deploy_id


def test_restore_refuses_a_hand_edit_and_force_saves_it_first(fake_host):
    deploy_id = deploy(fake_host)
    module = fake_host.site / MODULE
    module.write_text(PATCHED_TEXT + "# hotfix\n")
    refused = fake_host.call_ops(ops.restore_op(deploy_id, package=PACKAGE))
    assert refused.failed.code == Code.DRIFT, refused
    (found,) = refused.failed.data["drift"]
    assert found == {"file": MODULE, "expected_sha256": sha(PATCHED_TEXT),
                     "found_sha256": sha(PATCHED_TEXT + "# hotfix\n"),
                     "original_sha256": sha(MODULE_TEXT)}  # fmt: skip
    assert module.read_text() == PATCHED_TEXT + "# hotfix\n"
    assert (fake_host.site / NEW_FILE).read_text() == NEW_TEXT  # nothing restored
    status = fake_host.call_ops(ops.drift_op())
    assert status.results[0].data["drift"] == [found]
    assert status.results[0].data["files"] == [NEW_FILE, MODULE]  # what a restore puts back

    forced = fake_host.call_ops(ops.restore_op(deploy_id, package=PACKAGE, force=True))
    assert forced.ok, forced
    saved = forced.results[0].data["drift_saved"]
    assert saved.startswith(str(fake_host.state / "backups" / deploy_id / "drifted-"))
    copy = fake_host.state / "backups" / deploy_id / saved.rsplit("/", 1)[1] / "files" / MODULE
    assert copy.read_text() == PATCHED_TEXT + "# hotfix\n"
    assert oct(copy.stat().st_mode & 0o777) == "0o600"
    assert module.read_text() == MODULE_TEXT and not (fake_host.site / NEW_FILE).exists()


def test_an_edited_added_file_is_drift_and_a_deleted_one_is_not(fake_host):
    deploy_id = deploy(fake_host)
    added = fake_host.site / NEW_FILE
    added.write_text(NEW_TEXT + "# mine\n")
    assert fake_host.call_ops(ops.restore_op(deploy_id, package=PACKAGE)).failed.code == Code.DRIFT
    added.unlink()  # removing the file the push added loses nothing
    assert fake_host.call_ops(ops.restore_op(deploy_id, package=PACKAGE)).ok


def test_a_later_deploys_bytes_are_no_hand_edit(fake_host):
    """rollback --to an older deploy: the files hold what a later deploy wrote."""
    first = deploy(fake_host, "20260101T000000Z-d1")
    (fake_host.site / MODULE).write_text("v2\n")  # what the later deploy "wrote"
    later = fake_host.state / "backups" / "20260102T000000Z-d2"
    (later / "files").mkdir(parents=True)
    manifest = {"deploy_id": later.name, "site_packages": str(fake_host.site), "files": {
        MODULE: {"existed": True, "sha256": sha(PATCHED_TEXT), "result_sha256": sha("v2\n"),
                 "mode": 0o644}}}  # fmt: skip
    (later / "manifest.json").write_text(json.dumps(manifest))
    assert fake_host.call_ops(ops.restore_op(first, package=PACKAGE)).ok
    assert (fake_host.site / MODULE).read_text() == MODULE_TEXT


def test_a_backup_without_result_hashes_is_unchecked(fake_host):
    deploy_id = deploy(fake_host)
    path = fake_host.state / "backups" / deploy_id / "manifest.json"
    manifest = json.loads(path.read_text())
    for info in manifest["files"].values():
        info.pop("result_sha256")
    path.write_text(json.dumps(manifest))
    (fake_host.site / MODULE).write_text("edited\n")
    restored = fake_host.call_ops(ops.restore_op(deploy_id, package=PACKAGE))
    assert restored.ok and sorted(restored.results[0].data["unchecked"]) == [NEW_FILE, MODULE]
