"""push_host's decisions, every outcome branch, against a scripted agent (no SSH, no root).

What a user sees of the same paths on real sshd hosts is in test_push.py and tests/faults.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from ddtree_deploy.events import STAGE_ORDER
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.pipeline import PUSH_REQUESTS, PushOptions, push_host
from ddtree_deploy.results import Outcome
from ddtree_deploy.stages import PreparedPatchset, prepare_patchset
from tests.pipeline.fakehost import BAD_KEY, BUSY, LOST, UNREACHABLE, make_host, scene
from tests.support import REPO

# a source (empty: the scripted agent runs nothing) for every suite ddtree names
SUITE_SOURCES = dict.fromkeys(("integrity", "compile", "imports", "ddtree", "gpu", "server"), "")
OPTS = PushOptions(holder="tester@ctl pid 1", smoke_sources=SUITE_SOURCES)
DEAD_LOCK = {"run_id": "old", "holder": "me@here pid 99999999", "pid": 99999999}
PENDING = [{"deploy_id": "20260101T000000Z-ddtree-1.0.0-aaaaaa", "state": "installing"}]
PREFLIGHT = ["facts", "check_plan", "lock_acquire"]
BACKUP = ["backup", "journal:installing"]
INSTALL = ["install", "compile"]
SMOKE = ["smoke"]
RESTART = ["restart", "health", "smoke"]
COMMIT = ["journal:committed", "lock_release", "prune"]
ROLLBACK = ["restore", "journal:rolled_back", "lock_release"]
ROLLBACK_RESTART = ["restore", "journal:rolled_back", "restart", "health", "lock_release"]
UNLOCK = ["lock_release"]
# with no serving gate, backup goes with install and restart with commit (push.coalesce)
BACKUP_INSTALL = BACKUP + INSTALL
RESTART_COMMIT = RESTART + COMMIT


@cache
def prepared(version: str = "1.0.0") -> PreparedPatchset:
    """A real ddtree patchset, through the local gate (1.1.0 has [serve] and [lossless])."""
    return prepare_patchset(load_patchset(REPO / "patchsets" / "ddtree" / version))


def push(s, version: str = "1.0.0", opts: PushOptions = OPTS):
    result = push_host(s.run, prepared(version), opts)
    s.check_events_paired()
    return result


def test_push_requests_follow_stage_order():
    stages = [stage for request in PUSH_REQUESTS for stage in request.stages]
    assert set(stages) <= set(STAGE_ORDER)
    assert stages == sorted(stages, key=STAGE_ORDER.index)
    assert len(stages) == len(set(stages))


def test_push_joins_requests_without_a_gate_and_reports_every_stage():
    s = scene()
    result = push(s)
    assert result.outcome == Outcome.OK and result.message == "deployed"
    assert s.fake.sent == [PREFLIGHT, BACKUP_INSTALL, SMOKE, RESTART_COMMIT]
    assert s.stages("ok") == [
        "preflight", "backup", "journal", "install", "compile", "smoke",
        "restart", "health", "verify", "commit", "unlock", "prune",
    ]  # fmt: skip
    assert result.version_now == "ddtree@1.0.0" and result.deploy_id
    # every suite the patchset names runs (before review 3, those without a source were dropped)
    assert [x["suite"] for x in result.details["suites"]] == [*prepared().suites, "server"]
    assert s.transport.stats.execs == 4 and s.transport.stats.connects == 1


@pytest.mark.parametrize(
    "opts, service, why",
    [
        (dataclasses.replace(OPTS, restart=False), None, "--no-restart"),
        (OPTS, ServiceSpec(kind="none"), "service kind none"),
    ],
)
def test_push_without_restart_skips_it_and_verify(opts, service, why):
    s = scene(make_host(service) if service else None)
    result = push(s, opts=opts)
    assert result.outcome == Outcome.OK
    assert s.fake.sent == [PREFLIGHT, BACKUP_INSTALL, SMOKE, COMMIT]  # nothing to join commit to
    assert "restart skip" in s.stages() and "verify" not in s.stages("ok")
    assert [e.message for e in s.events if e.event == "skip"] == [why]


def test_no_changes_halts_in_preflight_without_taking_the_lock():
    s = scene(check_plan="no_changes")
    result = push(s)
    assert (result.outcome, result.message) == (Outcome.NO_CHANGES, "no changes")
    assert s.fake.sent == [PREFLIGHT]
    assert s.stages() == ["preflight start", "preflight ok"]
    assert s.events[-1].message == "already at the target result hashes"


@pytest.mark.parametrize(
    "code, outcome",
    [
        ("version_mismatch", Outcome.REFUSED),
        ("drift", Outcome.REFUSED),
        ("unsafe_path", Outcome.REFUSED),
        ("pending_recovery", Outcome.NEEDS_ATTENTION),
        ("locked", Outcome.LOCKED),
        ("state_dir_unwritable", Outcome.NEEDS_ATTENTION),
    ],
)
def test_preflight_refusal_codes_end_the_host_untouched(code, outcome):
    script = {"lock_acquire": code} if code == "state_dir_unwritable" else {"check_plan": code}
    s = scene(**script)
    result = push(s)
    assert result.outcome == outcome
    assert s.fake.sent == [PREFLIGHT]  # nothing else: no backup, no unlock
    assert s.stages() == ["preflight start", "preflight fail"]
    assert "--break-lock" not in result.message


def test_locked_by_a_live_run_names_the_holder():
    result = push(scene(check_plan="locked"))
    assert result.message == "host locked by alice@ctl pid 7"
    assert result.details["lock"]["holder"] == "alice@ctl pid 7"


def _locked_by_dead(controller: str):
    from ddtree_deploy.agent import OpResult

    lock = {**DEAD_LOCK, "controller": controller}
    return OpResult(
        op="check_plan", ok=False, code="locked", error="host locked", data={"lock": lock}
    )


def test_locked_by_a_dead_run_with_pending_deploy_says_recover():
    import socket

    s = scene(check_plan=_locked_by_dead(socket.gethostname()), facts_data={"pending": PENDING})
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert "unfinished deploy 20260101T000000Z-ddtree-1.0.0-aaaaaa left by a dead run" in (
        result.message
    )
    assert "ddtree-deploy recover -H h1" in result.message


def test_locked_by_a_dead_run_says_break_lock():
    import socket

    result = push(scene(check_plan=_locked_by_dead(socket.gethostname())))
    assert result.outcome == Outcome.LOCKED
    assert result.message.endswith("(that process is gone: --break-lock takes the lock over)")


def test_lock_of_another_controller_counts_as_alive():
    result = push(scene(check_plan=_locked_by_dead("elsewhere")))
    assert result.outcome == Outcome.LOCKED and "--break-lock" not in result.message


def test_break_lock_takeover_is_reported():
    s = scene(lock_acquire="lock_taken_over")
    assert push(s, opts=dataclasses.replace(OPTS, break_lock=True)).outcome == Outcome.OK
    assert (
        "preflight: --break-lock: took over the lock of bob@ctl pid 9 (run old, since "
        "2026-01-01T00:00:00Z)" in s.infos()
    )


def test_facts_failure_needs_attention():
    s = scene(facts="facts_failed")
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message == "facts failed: KeyError: 'paths'"


def test_busy_agent_in_preflight_needs_attention():
    s = scene(facts=BUSY)
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert s.stages() == ["preflight start", "preflight fail"]
    assert s.events[-1].message == "another agent is still working"


def test_unreachable_host_is_not_unlocked():
    s = scene(connect=UNREACHABLE)
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION and result.message.startswith("unreachable")
    assert s.fake.sent == [PREFLIGHT]
    assert s.transport.stats.connects == 0


def test_bad_host_key_is_refused():
    result = push(scene(connect=BAD_KEY))
    assert result.outcome == Outcome.REFUSED and "host key CHANGED" in result.message


def test_connection_lost_in_preflight_releases_the_lock_it_may_have_taken():
    s = scene(lock_acquire=LOST)
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION and "connection lost" in result.message
    assert s.fake.sent == [PREFLIGHT, UNLOCK]
    assert s.stages() == ["preflight start", "preflight fail", "unlock start", "unlock ok"]


@pytest.mark.parametrize(
    "at, sent, rollback",
    [
        ("backup", [BACKUP_INSTALL], ROLLBACK),
        ("journal:installing", [BACKUP_INSTALL], ROLLBACK),
        ("install", [BACKUP_INSTALL], ROLLBACK),
        ("smoke", [BACKUP_INSTALL, SMOKE], ROLLBACK),
        ("restart", [BACKUP_INSTALL, SMOKE, RESTART_COMMIT], ROLLBACK_RESTART),
        ("journal:committed", [BACKUP_INSTALL, SMOKE, RESTART_COMMIT], ROLLBACK_RESTART),
    ],
)
def test_connection_lost_mid_push_rolls_back_over_a_fresh_connection(at, sent, rollback):
    s = scene(**{at: LOST})
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert s.fake.sent == [PREFLIGHT, *sent, rollback]
    assert s.transport.closed == 1 and s.transport.stats.connects == 2
    assert s.stages()[-4:] == ["rollback start", "rollback ok", "unlock start", "unlock ok"]
    assert "connection lost" in result.message


def test_connection_lost_and_rollback_impossible_needs_attention():
    s = scene(install=LOST, restore=LOST)
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    # the request that was lost carried backup to compile: the message names every stage
    assert result.message.startswith(
        "connection lost during backup/journal/install/compile and rollback impossible"
    )
    assert "ddtree-deploy recover -H h1" in result.message
    assert s.stages()[-2:] == ["rollback start", "rollback fail"]


def test_backup_failure_leaves_site_packages_untouched_and_unlocks():
    s = scene(backup="backup_failed")
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message == "OSError: [Errno 28] No space left on device; site-packages untouched"
    assert s.fake.sent == [PREFLIGHT, BACKUP_INSTALL, UNLOCK]  # install never ran
    assert s.stages() == [
        "preflight start",
        "preflight ok",
        "backup start",
        "backup fail",
        "unlock start",
        "unlock ok",
    ]  # fmt: skip  (journal never reached: no event; no `commit` on a failure path)


@pytest.mark.parametrize(
    "script, failed_stage, sent, rollback, said",
    [
        (
            {"install": "install_failed"},
            "install",
            [BACKUP_INSTALL],
            ROLLBACK,
            "install failed: spec_info",
        ),
        (
            {"compile": "compile_failed"},
            "compile",
            [BACKUP_INSTALL],
            ROLLBACK,
            "compile failed: py_comp",
        ),
        (
            {"smoke": "smoke_failed"},
            "smoke",
            [BACKUP_INSTALL, SMOKE],
            ROLLBACK,
            "smoke failed: imports: import: sglang.srt.speculative.ddtree_utils: ImportError",
        ),
        (
            {"restart": "restart_failed"},
            "restart",
            [BACKUP_INSTALL, SMOKE, RESTART_COMMIT],
            ROLLBACK_RESTART,
            "restart failed: start exited 1",
        ),
        (
            {"health": "unhealthy"},
            "health",
            [BACKUP_INSTALL, SMOKE, RESTART_COMMIT],
            ROLLBACK_RESTART,
            "health failed: the service exited while starting",
        ),
        (
            {"smoke": [None, "verify_failed"]},
            "verify",
            [BACKUP_INSTALL, SMOKE, RESTART_COMMIT],
            ROLLBACK_RESTART,
            "smoke failed: server: lossless_sequential: prompt 3/8: first difference at token",
        ),
        (
            {"journal:committed": "commit_failed"},
            "commit",
            [BACKUP_INSTALL, SMOKE, RESTART_COMMIT],
            ROLLBACK_RESTART,
            "journal failed: PermissionError",
        ),
        (
            {"prune": "prune_failed"},
            "prune",
            [BACKUP_INSTALL, SMOKE, RESTART_COMMIT],
            ROLLBACK_RESTART,
            "prune failed: PermissionError",
        ),
    ],
)
def test_failed_gate_rolls_back(script, failed_stage, sent, rollback, said):
    s = scene(**script)
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message.startswith(said) and result.message.endswith("; rolled back")
    assert s.fake.sent == [PREFLIGHT, *sent, rollback]
    assert f"{failed_stage} fail" in s.stages()
    assert s.stages()[-4:] == ["rollback start", "rollback ok", "unlock start", "unlock ok"]
    assert result.details["failure"]["op"] == next(iter(script)).split(":")[0]


def test_failed_smoke_keeps_every_suite_for_reports():
    s = scene(smoke="smoke_failed")
    result = push(s)
    suites = result.details["failure"]["data"]["suites"]
    assert [x["suite"] for x in suites] == ["integrity", "imports"]
    assert [i.split(":")[1].strip() for i in s.infos()] == ["integrity", "imports"]


def test_busy_agent_mid_push_rolls_back():
    s = scene(smoke=BUSY)
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message == "failed: another agent is still working; rolled back"
    assert "failure" not in result.details


def test_busy_agent_refusing_backup_and_install_leaves_them_untouched():
    # the joined request was refused whole: nothing of it ran, so nothing is restored
    s = scene(install=BUSY)
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message == "another agent is still working; site-packages untouched"
    assert s.fake.sent == [PREFLIGHT, BACKUP_INSTALL, UNLOCK]


@pytest.mark.parametrize(
    "script, said, last",
    [
        (
            {"install": "install_failed", "restore": "restore_failed"},
            "rollback FAILED: cannot write spec_info.py",
            [ROLLBACK, ["journal:rollback_failed", "lock_release"]],
        ),
        (
            {"health": ["unhealthy", "unhealthy"]},
            "files restored, but the service is not healthy",
            [ROLLBACK_RESTART, UNLOCK],
        ),
        (
            {"install": "install_failed", "lock_release": "unlock_failed"},
            "files restored, but the host lock could not be released",
            [ROLLBACK],
        ),
    ],
)
def test_failed_rollback_needs_attention(script, said, last):
    s = scene(**script)
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert result.message.startswith(said)
    assert s.fake.sent[-len(last) :] == last
    assert result.details["failure"]["op"] in ("install", "health")


def test_lost_in_backup_and_no_backup_made_says_untouched():
    s = scene(backup=LOST, restore="no_backup")
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message.startswith(
        "backup/journal/install/compile: h1: connection lost: EOF during backup"
    )
    assert result.message.endswith("; no backup was made, site-packages untouched")
    assert s.fake.sent[-1] == UNLOCK and s.stages()[-2:] == ["unlock start", "unlock ok"]


def _serve_host():
    service = ServiceSpec(
        kind="command", start="/bin/true", stop="/bin/true", args_file="/etc/sglang/serve.env"
    )
    return make_host(service)


def test_lossless_push_records_a_reference_before_the_restart():
    s = scene(_serve_host())
    result = push(s, "1.1.0")
    assert result.outcome == Outcome.OK
    # the reference is recorded beside the suites (one request), still its own stage
    assert s.fake.sent[2:] == [SMOKE, RESTART_COMMIT]
    assert "reference ok" in s.stages()
    assert any(i.startswith("preflight: serve flags: /etc/sglang/serve.env") for i in s.infos())


def test_reference_is_best_effort():
    s = scene(_serve_host(), **{"smoke:beside": "reference_failed"})
    result = push(s, "1.1.0")
    assert result.outcome == Outcome.OK
    assert "reference fail" in s.stages() and "commit ok" in s.stages()
    assert any(i.startswith("reference: no reference recorded: smoke failed") for i in s.infos())


def test_serve_flags_without_args_file_are_refused_before_any_contact():
    s = scene()
    result = push(s, "1.1.0")
    assert result.outcome == Outcome.REFUSED and "service.args_file" in result.message
    assert s.fake.sent == []


def test_lock_of_a_live_run_on_this_controller_has_no_hint():
    import os
    import socket

    from ddtree_deploy.agent import OpResult

    lock = {"holder": "me", "controller": socket.gethostname(), "pid": os.getpid()}
    locked = OpResult(op="check_plan", ok=False, code="locked", error="locked", data={"lock": lock})
    result = push(scene(check_plan=locked))
    assert (result.outcome, result.message) == (Outcome.LOCKED, "locked")


def test_unlock_that_cannot_reach_the_host_is_reported_and_ends_as_before():
    s = scene(lock_acquire=LOST, connect=[None, UNREACHABLE])
    result = push(s)
    assert result.outcome == Outcome.NEEDS_ATTENTION
    assert s.stages()[-2:] == ["unlock start", "unlock fail"]


@pytest.mark.parametrize("sources", [None, {k: "" for k in SUITE_SOURCES if k != "server"}])
def test_a_suite_named_without_a_source_is_refused_before_any_contact(sources):
    """Review 3 finding 6: PushOptions(smoke_sources=None), the library default, dropped
    every named suite in silence and smoke passed with nothing run. A patchset's suite
    (1.0.0: integrity, then server after the restart) without a source is bad input: exit 2,
    naming it, nothing sent."""
    s = scene()
    result = push(s, opts=PushOptions(holder="t", smoke_sources=sources))
    assert result.outcome == Outcome.REFUSED, result.message
    missing = "integrity" if sources is None else "server"
    assert f"ddtree@1.0.0: smoke suite {missing!r} has no source" in result.message
    assert s.fake.sent == []
