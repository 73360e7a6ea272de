"""Hand edits, unreadable answers and live pushes in rollback, recover, a push's own
rollback and status, against a scripted agent (no SSH, no root); the real-host versions
are tests/faults/test_hand_edits.py and tests/faults/test_leftovers.py."""

from __future__ import annotations

import functools
import time

from ddtree_deploy.agent import OpResult
from ddtree_deploy.agent.host.wire_outcomes import DriftResult
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.pipeline import PushOptions, push_host, recover_host, rollback_host, status_host
from ddtree_deploy.results import Outcome
from ddtree_deploy.stages import prepare_patchset
from tests.pipeline.fakehost import scene
from tests.pipeline.test_push_logic import SUITE_SOURCES
from tests.support import REPO

DEPLOY = "20260101T000000Z-ddtree-1.0.0-aaaaaa"
COMMITTED = {"deploys": [{"deploy_id": DEPLOY, "state": "committed", "patchset": "ddtree@1.0.0"}]}
FILE = "sglang/srt/speculative/spec_info.py"
OPTS = PushOptions(holder="t", smoke_sources=SUITE_SOURCES)
PREPARED = functools.cache(lambda: prepare_patchset(load_patchset(REPO / "patchsets/ddtree/1.0.0")))
DRIFT = [{"file": FILE, "expected_sha256": "a" * 64, "found_sha256": "b" * 64,
          "original_sha256": "c" * 64}]  # fmt: skip
REFUSED_DRIFT = OpResult(
    op="restore",
    ok=False,
    code="drift",
    error=f"changed on the host since deploy {DEPLOY} (hand edits?): {FILE}: expected sha256 "
    f"{'a' * 64}, found {'b' * 64}; nothing restored",
    data={"drift": DRIFT},
)


def test_rollback_refused_by_a_hand_edit_is_exit_2_unlocked_and_journals_nothing():
    s = scene(facts_data=COMMITTED, restore=REFUSED_DRIFT)
    result = rollback_host(s.run, "t", None, restart=True)
    assert result.outcome == Outcome.REFUSED
    assert FILE in result.message and "a" * 64 in result.message and "--force" in result.message
    assert result.details["drift"] == DRIFT
    assert s.fake.sent == [
        ["facts", "lock_acquire"],
        ["restore", "journal:rolled_back", "restart", "health", "lock_release"],
        ["lock_release"],
    ]  # the restore failed first: nothing after it ran, then the lock went
    (event,) = [e for e in s.events if e.event == "info" and (e.data or {}).get("drift")]
    assert event.data == {"deploy_id": DEPLOY, "drift": DRIFT}
    assert s.transport.requests[1].ops[0].args == {
        "deploy_id": DEPLOY,
        "force": False,
        "package": "sglang",
        "serve_path": None,
    }


def restored(saved: str) -> dict[str, object]:
    """A forced restore's answer (wire_outcomes.Restored): DRIFT's bytes saved in `saved`."""
    backup = f"/var/lib/ddtree-deploy/backups/{DEPLOY}"
    return {"files": {FILE: "restored"}, "backup": backup, "drift": DRIFT, "drift_saved": saved,
            "unchecked": []}  # fmt: skip


def test_forced_rollback_says_where_the_hand_edits_went():
    saved = f"/var/lib/ddtree-deploy/backups/{DEPLOY}/drifted-20260101T000001Z"
    answer = OpResult(op="restore", ok=True, data=restored(saved))
    s = scene(facts_data=COMMITTED, restore=answer)
    result = rollback_host(s.run, "t", None, restart=False, force=True)
    assert result.outcome == Outcome.OK
    assert result.message == f"rolled back {DEPLOY}; hand-edited files saved in {saved}"
    assert s.transport.requests[1].ops[0].args == {
        "deploy_id": DEPLOY,
        "force": True,
        "package": "sglang",
        "serve_path": None,
    }
    (event,) = [e for e in s.events if e.event == "info" and (e.data or {}).get("drift_saved")]
    assert event.data == {"deploy_id": DEPLOY, "drift": DRIFT, "drift_saved": saved}


def test_recover_refused_by_a_hand_edit():
    pending = {"deploy_id": DEPLOY, "state": "installing", "run_id": "dead"}
    s = scene(facts_data={"pending": [pending]}, restore=REFUSED_DRIFT)
    result = recover_host(s.run, "t", restart=False)
    assert result.outcome == Outcome.REFUSED and result.details["drift"] == DRIFT
    assert s.fake.sent[-1] == ["lock_release"]


def test_a_pushs_own_rollback_keeps_what_was_edited_mid_push_and_still_rolls_back():
    """A file edited while the push ran (its smoke then failed): the push's own rollback is
    forced, so the host ends as it was (exit 1) and the edited bytes are kept beside the
    backup, the message saying where."""
    saved = f"/var/lib/ddtree-deploy/backups/{DEPLOY}/drifted-20260101T000001Z"
    answer = OpResult(op="restore", ok=True, data=restored(saved))
    s = scene(smoke="smoke_failed", restore=answer)
    result = push_host(s.run, PREPARED(), OPTS)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message.endswith(f"; rolled back; hand-edited files saved in {saved}")
    (restore,) = [op for r in s.transport.requests for op in r.ops if op.op == "restore"]
    assert restore.args["force"] is True


def test_an_unreadable_preflight_answer_releases_the_lock():
    s = scene(facts_data={**COMMITTED, "no_such_fact": 1})
    result = rollback_host(s.run, "t", None, restart=True)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message.startswith("unreadable answer from the host:")
    assert "no_such_fact" in result.message
    assert s.fake.sent == [["facts", "lock_acquire"], ["lock_release"]]


def test_status_names_hand_edited_files():
    found = DriftResult(DEPLOY, DRIFT, unchecked=[], error=None, files=[FILE])
    answer = OpResult(op="drift", ok=True, data=found.to_dict())
    s = scene(facts_data=COMMITTED, drift=answer)
    result = status_host(s.run, None)
    assert result.outcome == Outcome.FAILED
    assert f"hand-edited since {DEPLOY}: {FILE} (expected sha256 {'a' * 64}" in result.message
    assert result.details["drift"] == DRIFT


def test_status_of_a_live_push_names_its_holder():
    pending = {"deploy_id": DEPLOY, "state": "installing", "run_id": "live"}
    lock = {"run_id": "live", "holder": "ann@ctl pid 7", "started": "now", "controller": "x",
            "expires_epoch": time.time() + 600}  # fmt: skip
    live = status_host(scene(facts_data={"pending": [pending], "lock": lock}).run, None)
    assert live.outcome == Outcome.OK
    assert (
        live.message
        == f"deploy {DEPLOY} in progress: host locked by ann@ctl pid 7 (run live, since now)"
    )
    expired = {**lock, "expires_epoch": 0}
    dead = status_host(scene(facts_data={"pending": [pending], "lock": expired}).run, None)
    assert dead.outcome == Outcome.NEEDS_ATTENTION and dead.message.endswith("run recover")
