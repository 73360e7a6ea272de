"""rollback, recover, prune, status, plan, smoke and hosts check decisions, against a
scripted agent (no SSH, no root); the real-host versions are in test_push.py."""

from __future__ import annotations

from functools import cache

import pytest

from ddtree_deploy.agent import OpResult
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.pipeline import (
    hosts_check,
    plan_host,
    prune_host,
    recover_host,
    rollback_host,
    smoke_host,
    status_host,
)
from ddtree_deploy.results import Outcome
from ddtree_deploy.stages import PreparedPatchset, prepare_patchset
from tests.pipeline.fakehost import BUSY, LOST, UNREACHABLE, scene
from tests.support import REPO

DEPLOY = "20260101T000000Z-ddtree-1.0.0-aaaaaa"
COMMITTED = {"deploys": [{"deploy_id": DEPLOY, "state": "committed", "patchset": "ddtree@1.0.0"}]}
PENDING = {"deploy_id": DEPLOY, "state": "installing", "run_id": "dead"}
ROLLBACK_RESTART = ["restore", "journal:rolled_back", "restart", "health", "lock_release"]


@cache
def prepared() -> PreparedPatchset:
    return prepare_patchset(load_patchset(REPO / "patchsets" / "ddtree" / "1.0.0"))


def files_at(state: str) -> dict:
    """facts["files"] with every file of ddtree 1.0.0 at its base, result or a drifted hash."""
    sha = {"base": lambda f: f.base_sha256, "result": lambda f: f.result_sha256}
    pick = sha.get(state, lambda f: "0" * 64)
    files = {f.path: {"sha256": pick(f), "record_sha256": f.base_sha256} for f in prepared().files}
    return {"files": files}


# rollback


def test_rollback_restores_the_last_committed_deploy():
    s = scene(facts_data=COMMITTED)
    result = rollback_host(s.run, "t", None, restart=True)
    assert (result.outcome, result.message) == (Outcome.OK, f"rolled back {DEPLOY}")
    assert s.fake.sent == [["facts", "lock_acquire"], ROLLBACK_RESTART]
    assert s.stages()[-4:] == ["rollback start", "rollback ok", "unlock start", "unlock ok"]
    s.check_events_paired()


@pytest.mark.parametrize(
    "to, facts, said",
    [
        (None, {}, "no committed deploy to roll back"),
        ("nope", {"backups": [{"deploy_id": DEPLOY}]}, "no backup named 'nope' on this host"),
    ],
)
def test_rollback_with_nothing_to_restore_is_refused_and_unlocks(to, facts, said):
    s = scene(facts_data=facts)
    result = rollback_host(s.run, "t", to, restart=False)
    assert (result.outcome, result.message) == (Outcome.REFUSED, said)
    assert s.fake.sent == [["facts", "lock_acquire"], ["lock_release"]]


def test_rollback_to_a_named_backup_without_restart():
    s = scene(facts_data={"backups": [{"deploy_id": DEPLOY}]})
    assert rollback_host(s.run, "t", DEPLOY, restart=False).outcome == Outcome.OK
    assert s.fake.sent[-1] == ["restore", "journal:rolled_back", "lock_release"]


@pytest.mark.parametrize(
    "script, outcome",
    [
        ({"lock_acquire": "locked"}, Outcome.LOCKED),
        ({"lock_acquire": "state_dir_unwritable"}, Outcome.NEEDS_ATTENTION),
        ({"facts": BUSY}, Outcome.NEEDS_ATTENTION),
        ({"connect": UNREACHABLE}, Outcome.NEEDS_ATTENTION),
    ],
)
def test_rollback_preflight_failures(script, outcome):
    s = scene(**script)
    assert rollback_host(s.run, "t", None, restart=True).outcome == outcome
    s.check_events_paired()


def test_rollback_whose_restore_fails_needs_attention():
    s = scene(facts_data=COMMITTED, restore="restore_failed")
    result = rollback_host(s.run, "t", None, restart=True)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message.startswith("rollback FAILED: cannot write spec_info.py")
    assert s.fake.sent[-1] == ["journal:rollback_failed", "lock_release"]


def test_rollback_lost_mid_restore_says_recover():
    s = scene(facts_data=COMMITTED, restore=LOST)
    result = rollback_host(s.run, "t", None, restart=True)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert "connection lost during rollback" in result.message
    assert "ddtree-deploy recover -H h1" in result.message


# recover


def test_recover_with_nothing_pending():
    s = scene()
    result = recover_host(s.run, "t", restart=True)
    assert (result.outcome, result.message) == (Outcome.NO_CHANGES, "nothing to recover")
    assert s.fake.sent == [["facts"]]


@pytest.mark.parametrize("lock_run, steals", [("dead", True), (None, False)])
def test_recover_takes_over_only_the_dead_runs_lock(lock_run, steals):
    lock = {"run_id": lock_run} if lock_run else None
    s = scene(facts_data={"pending": [PENDING], "lock": lock})
    result = recover_host(s.run, "t", restart=False)
    assert result.outcome == Outcome.OK
    assert result.message == f"recovered: restored backup of {DEPLOY}"
    assert s.fake.sent == [
        ["facts"],
        ["lock_acquire"],
        ["restore", "journal:rolled_back", "lock_release"],
    ]
    take = s.transport.requests[1].ops[0]
    assert take.args["break_lock"] is steals
    assert s.stages("ok") == ["preflight", "recover", "recover", "unlock"]


def test_recover_refuses_a_live_runs_lock():
    s = scene(facts_data={"pending": [PENDING], "lock": {"run_id": "alive"}}, lock_acquire="locked")
    result = recover_host(s.run, "t", restart=True)
    assert (result.outcome, result.message) == (Outcome.LOCKED, "host locked by alice@ctl pid 7")


@pytest.mark.parametrize(
    "script, outcome",
    [
        ({"connect": UNREACHABLE}, Outcome.NEEDS_ATTENTION),
        ({"facts": "facts_failed"}, Outcome.NEEDS_ATTENTION),
    ],
)
def test_recover_cannot_read_the_host(script, outcome):
    assert recover_host(scene(**script).run, "t", restart=True).outcome == outcome


def test_recover_lost_taking_the_lock_releases_it():
    s = scene(facts_data={"pending": [PENDING]}, lock_acquire=LOST)
    result = recover_host(s.run, "t", restart=True)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert s.fake.sent[-1] == ["lock_release"]


def test_recover_whose_restore_fails_needs_attention():
    s = scene(facts_data={"pending": [PENDING]}, restore="restore_failed")
    result = recover_host(s.run, "t", restart=False)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message.startswith("recover FAILED")


# prune


def test_prune_under_the_lock():
    s = scene()
    result = prune_host(s.run, "t", keep=2)
    assert (result.outcome, result.message) == (Outcome.OK, "removed 1 backup(s)")
    assert s.fake.sent == [["lock_acquire", "prune", "lock_release"]]
    assert s.stages("ok") == ["preflight", "prune", "unlock"]


def test_prune_on_a_locked_host():
    assert prune_host(scene(lock_acquire="locked").run, "t", 2).outcome == Outcome.LOCKED


def test_failed_prune_releases_the_lock():
    s = scene(prune="prune_failed")
    result = prune_host(s.run, "t", keep=2)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert s.fake.sent[-1] == ["lock_release"]
    s.check_events_paired()


# read-only commands


def test_hosts_check_reports_facts_as_the_check_stage():
    serve = {"path": "/etc/serve.env", "sha256": "0" * 64, "text": "SGLANG_ARGS=--api-key k"}
    s = scene(facts_data={"serve": serve})
    result = hosts_check(s.run, None)
    assert (result.outcome, result.message) == (Outcome.OK, "sglang 0.5.13.post1")
    assert s.stages() == ["check start", "check ok"]
    assert "text" not in result.details["serve"]  # may hold an api key
    assert result.details["serve"]["args"] == ["--api-key", "***"]


@pytest.mark.parametrize(
    "facts, outcome, said",
    [
        ({}, Outcome.OK, "deployed: nothing"),
        (COMMITTED, Outcome.OK, "deployed: ddtree@1.0.0"),
        (
            {"pending": [PENDING]},
            Outcome.NEEDS_ATTENTION,
            f"unfinished deploy {DEPLOY}: run recover",
        ),
    ],
)
def test_status_without_a_patchset(facts, outcome, said):
    s = scene(facts_data=facts)
    result = status_host(s.run, None)
    assert (result.outcome, result.message) == (outcome, said)
    assert s.stages() == ["status start", "status ok"]


@pytest.mark.parametrize(
    "state, outcome, said",
    [
        ("result", Outcome.OK, "at ddtree@1.0.0"),
        ("base", Outcome.OK, "not at ddtree@1.0.0"),
        ("drifted", Outcome.FAILED, "drift against ddtree@1.0.0"),
    ],
)
def test_status_against_a_patchset(state, outcome, said):
    result = status_host(scene(facts_data=files_at(state)).run, prepared())
    assert (result.outcome, result.message) == (outcome, said)


@pytest.mark.parametrize(
    "facts, outcome, said",
    [
        (files_at("base"), Outcome.OK, "3 file(s) would change"),
        (files_at("result"), Outcome.NO_CHANGES, "no changes"),
        (files_at("drifted"), Outcome.REFUSED, "drifted: "),
        ({**files_at("base"), "pending": [PENDING]}, Outcome.NEEDS_ATTENTION, "unfinished"),
        ({**files_at("base"), "package_version": "0.5.9"}, Outcome.REFUSED, "installed 0.5.9"),
    ],
)
def test_plan(facts, outcome, said):
    s = scene(facts_data=facts)
    result = plan_host(s.run, prepared())
    assert result.outcome == outcome and result.message.startswith(said)
    assert s.fake.sent == [["facts"]]


def test_smoke_reports_each_suite():
    s = scene()
    result = smoke_host(s.run, prepared(), {"integrity": "", "compile": ""})
    assert (result.outcome, result.message) == (Outcome.OK, "all suites passed")
    assert s.infos() == [
        "smoke: integrity: passed (0/0 checks)",
        "smoke: compile: passed (0/0 checks)",
    ]


def test_smoke_failure_names_the_check():
    s = scene(smoke="smoke_failed")
    result = smoke_host(s.run, prepared(), {"integrity": "", "imports": ""})
    assert result.outcome == Outcome.FAILED
    assert result.message.startswith("imports: import: sglang.srt.speculative.ddtree_utils")


@pytest.mark.parametrize("script", [{"smoke": LOST}, {"smoke": BUSY}])
def test_smoke_that_cannot_run_needs_attention(script):
    s = scene(**script)
    assert smoke_host(s.run, prepared(), {"integrity": ""}).outcome == Outcome.NEEDS_ATTENTION
    s.check_events_paired()


def test_facts_failure_result_op():
    failed = OpResult(op="facts", ok=False, error="boom")
    result = status_host(scene(facts=failed).run, None)
    assert (result.outcome, result.message) == (Outcome.NEEDS_ATTENTION, "facts failed: boom")


def test_plan_shows_the_serve_flags_change():
    from ddtree_deploy.inventory.service import ServiceSpec
    from tests.pipeline.fakehost import make_host

    v110 = prepare_patchset(load_patchset(REPO / "patchsets" / "ddtree" / "1.1.0"))
    service = ServiceSpec(kind="command", start="/bin/true", stop="/bin/true", args_file="/e/s")
    base = {"files": {f.path: {"sha256": f.base_sha256, "record_sha256": None} for f in v110.files}}
    serve = {"path": "/e/s", "sha256": "0" * 64, "text": "SGLANG_ARGS=--model m"}
    s = scene(
        make_host(service), facts_data={**base, "package_version": "0.5.13.post1", "serve": serve}
    )
    result = plan_host(s.run, v110)
    assert result.details["files"]["/e/s"] == "flags"
    assert "--speculative-algorithm" in " ".join(result.details["serve"]["changes"])
    refused = plan_host(scene(facts_data=base).run, v110)  # [serve] but no args_file
    assert refused.outcome == Outcome.REFUSED and "service.args_file" in refused.message


@pytest.mark.parametrize(
    "command",
    [
        lambda run: hosts_check(run, None),
        lambda run: prune_host(run, "t", 2),
        lambda run: smoke_host(run, prepared(), {"integrity": ""}),
        lambda run: plan_host(run, prepared()),
    ],
    ids=["hosts-check", "prune", "smoke", "plan"],
)
def test_unreachable_host_needs_attention(command):
    s = scene(connect=UNREACHABLE)
    result = command(s.run)
    assert result.outcome == Outcome.NEEDS_ATTENTION and result.message.startswith("unreachable")
    assert len(s.fake.sent) == 1  # nothing held on the host: no unlock attempt


def test_version_pick_whose_facts_fail_needs_attention():
    from ddtree_deploy.pipeline.select import read_package_version

    result = read_package_version(scene(facts="facts_failed").run, "sglang")
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message == "facts failed: KeyError: 'paths'"
