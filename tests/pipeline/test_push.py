"""push / status / rollback / recover against a real sshd host and real sglang files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ddtree_deploy.agent.host.state import JOURNAL_ROTATE_BYTES
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.pipeline import PUSH_REQUESTS
from tests.support import REPO, journal_history, make_patchset, utils_file, write_journal

pytestmark = pytest.mark.hosts
PUSH_STAGES = [stage for request in PUSH_REQUESTS for stage in request.stages]
TARGETS = [
    "sglang/srt/speculative/ddtree_utils.py",
    "sglang/srt/speculative/spec_info.py",
    "sglang/srt/server_args.py",
]


def result_hashes(patchsets) -> dict[str, str]:
    lock = load_patchset(patchsets / "ddtree" / "1.0.0").lock
    return {path: f.result_sha256 for path, f in lock.files.items()}


def deployed_hashes(host) -> dict[str, str | None]:
    digest = host.tree_digest()
    return {p: digest.get(p.removeprefix("sglang/")) for p in TARGETS}


def test_push_then_status_then_idempotent_repush(deploy):
    before = deploy.host.tree_digest()
    done = deploy.cli("push", "-H", "host0", "--json")
    assert done.returncode == 0, done.stderr
    assert deployed_hashes(deploy.host) == result_hashes(deploy.patchsets)
    states = [e["state"] for e in deploy.journal()]
    assert states == ["installing", "committed"]
    assert not deploy.lock_file().exists()
    events = [json.loads(line) for line in done.stdout.splitlines()]
    stages = [e["stage"] for e in events if e["event"] == "ok"]
    for stage in PUSH_STAGES:
        # the fast patchset has no reference or verify, and this host no serving gate
        if stage not in ("reference", "verify", "baseline", "canary"):
            assert stage in stages
    after = deploy.host.tree_digest()
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed == {
        "srt/speculative/spec_info.py",
        "srt/server_args.py",
        "srt/speculative/ddtree_utils.py",
    }

    status = deploy.cli("status", "-H", "host0", "-p", "ddtree@1.0.0", "--json")
    assert status.returncode == 0
    summary = [json.loads(x) for x in status.stdout.splitlines() if '"summary"' in x][-1]
    assert summary["data"]["version_now"] == "ddtree@1.0.0"
    assert "at ddtree@1.0.0" in summary["message"]

    server_log = deploy.host.service_dir_on_disk / "server.log"
    starts = server_log.read_text().count("ready to roll")
    again = deploy.cli("push", "-H", "host0", "--json")
    assert again.returncode == 0
    assert "no changes" in again.stderr
    ops = [json.loads(x)["stage"] for x in again.stdout.splitlines()]
    assert "install" not in ops and "restart" not in ops
    assert server_log.read_text().count("ready to roll") == starts  # no restart
    assert [e["state"] for e in deploy.journal()] == ["installing", "committed"]


def _syntax_error(root):
    path = utils_file(root)
    path.write_text(path.read_text() + "\ndef broken(:\n")


def _import_error(root):
    path = utils_file(root)
    path.write_text(
        path.read_text() + "\nfrom sglang.srt.speculative.spec_info import NoSuchName\n"
    )


def _raise_at_import(root):
    path = utils_file(root)
    path.write_text(path.read_text() + "\nraise RuntimeError('deliberately broken patch')\n")


@pytest.mark.parametrize(
    "case, suites, stub, expected",
    [
        ("compile", None, {}, "py_compile failed"),
        ("imports", ["imports"], {}, "smoke failed: imports"),
        # the failing suite among others that pass still fails the push, rolled back
        pytest.param(
            "imports",
            ["integrity", "compile", "imports"],
            {},
            "smoke failed: imports",
            id="imports-among-suites",
        ),
        # The stub dies importing the broken patch: health sees the service exit at once.
        ("health", None, {}, "the service exited while starting"),
    ],
)
def test_failed_gate_rolls_back_byte_identical(deploy, tmp_path, case, suites, stub, expected):
    mutate = {"compile": _syntax_error, "imports": _import_error, "health": _raise_at_import}.get(
        case
    )
    if case == "compile":
        # the lock itself refuses a patchset that does not compile: lock first, then break it
        patchsets = make_patchset(tmp_path / case, suites=suites)
        _syntax_error(patchsets / "ddtree" / "1.0.0")
        _relock_sources_only(patchsets)
    else:
        patchsets = make_patchset(tmp_path / case, suites=suites, mutate=mutate)
    if case == "health":
        inv = deploy.sandbox.inventory_path
        # Long enough for the stub to import sglang and die on a loaded machine: the wait ends
        # when the service exits, so a dead start costs no more than that.
        inv.write_text(inv.read_text().replace("ready_timeout_s = 60", "ready_timeout_s = 45"))
    deploy.host.write_stub_config(**stub)
    before = deploy.host.tree_digest()
    done = deploy.cli("push", "-H", "host0", patchsets=patchsets)
    assert done.returncode == 1, done.stderr
    assert expected in done.stderr and "rolled back" in done.stderr
    assert deploy.host.tree_digest() == before
    assert [e["state"] for e in deploy.journal()] == ["installing", "rolled_back"]
    assert not deploy.lock_file().exists()


@pytest.mark.parametrize("stub", [{"fail_start": True}, {"never_ready": True}])
def test_service_broken_regardless_of_patch_needs_attention(deploy, stub):
    """The host's service fails even after the rollback: files restored, exit 3, said so."""
    inv = deploy.sandbox.inventory_path
    inv.write_text(inv.read_text().replace("ready_timeout_s = 60", "ready_timeout_s = 3"))
    deploy.host.write_stub_config(**stub)
    before = deploy.host.tree_digest()
    done = deploy.cli("push", "-H", "host0")
    assert done.returncode == 3, done.stderr
    assert "files restored, but the service is not healthy" in done.stderr
    assert deploy.host.tree_digest() == before
    assert [e["state"] for e in deploy.journal()] == ["installing", "rolled_back"]
    assert not deploy.lock_file().exists()


def _relock_sources_only(patchsets):
    """Re-hash the sources in the lock without compiling: simulates a lock made elsewhere."""
    from ddtree_deploy.agent import sha256_bytes

    root = patchsets / "ddtree" / "1.0.0"
    lock_path = root / "patchset.lock.json"
    lock = json.loads(lock_path.read_text())
    entry = lock["files"]["sglang/srt/speculative/ddtree_utils.py"]
    data = utils_file(root).read_bytes()
    entry["source_sha256"] = entry["result_sha256"] = sha256_bytes(data)
    lock_path.write_text(json.dumps(lock))


def test_drifted_base_file_is_refused_exit_2_nothing_written(deploy):
    target = deploy.host.site_packages_on_disk / "sglang/srt/server_args.py"
    target.write_text(target.read_text() + "\n# local hotfix\n")
    before = deploy.host.tree_digest()
    done = deploy.cli("push", "-H", "host0")
    assert done.returncode == 2, done.stderr
    assert "sglang/srt/server_args.py" in done.stderr and "differ" in done.stderr
    assert deploy.host.tree_digest() == before
    assert deploy.journal() == [] and not deploy.lock_file().exists()
    plan = deploy.cli("plan", "-H", "host0")
    assert plan.returncode == 2 and "drifted" in plan.stdout  # the plan table: data


def test_concurrent_push_gets_exit_4_naming_the_holder(deploy):
    inv = deploy.sandbox.inventory_path
    inv.write_text(
        inv.read_text().replace(
            "ready_timeout_s = 60", "ready_timeout_s = 60\npoll_interval_s = 0.2"
        )
    )
    deploy.host.write_stub_config(startup_delay_s=15)
    first = subprocess.Popen(
        [sys.executable, "-m", "ddtree_deploy", "push", "-H", "host0", "-i", str(inv),
         "--patchsets-dir", str(deploy.patchsets), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    _wait_for_event(first, "restart")
    second = deploy.cli("push", "-H", "host0")
    assert second.returncode == 4, second.stderr
    assert "locked by" in second.stderr and "pid" in second.stderr
    first.communicate(timeout=120)
    assert first.returncode == 0


def _wait_for_event(proc, stage: str, kind: str = "start") -> None:
    for line in proc.stdout:
        event = json.loads(line)
        if event["stage"] == stage and event["event"] == kind:
            return
    raise AssertionError(f"no {stage} {kind} event; stderr: {proc.stderr.read()}")


def test_sigkill_during_install_then_recover(deploy):
    before = deploy.host.tree_digest()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddtree_deploy", "push", "-H", "host0",
         "-i", str(deploy.sandbox.inventory_path), "--patchsets-dir", str(deploy.patchsets),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    _wait_for_event(proc, "install")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)  # the agent finishes its install on the host: SIGHUP is ignored
    assert deploy.journal()[-1]["state"] == "installing"
    refused = deploy.cli("push", "-H", "host0")
    assert refused.returncode == 3 and "recover" in refused.stderr
    status = deploy.cli("status", "-H", "host0")
    assert status.returncode == 3 and "unfinished deploy" in status.stdout + status.stderr
    recovered = deploy.cli("recover", "-H", "host0")
    assert recovered.returncode == 0, recovered.stderr
    assert deploy.host.tree_digest() == before
    assert deploy.journal()[-1]["state"] == "rolled_back"
    assert not deploy.lock_file().exists()
    assert deploy.cli("push", "-H", "host0").returncode == 0


def test_rollback_after_commit_restores_and_prunes(deploy, tmp_path):
    before = deploy.host.tree_digest()
    assert deploy.cli("push", "-H", "host0").returncode == 0
    done = deploy.cli("rollback", "-H", "host0")
    assert done.returncode == 0, done.stderr
    assert deploy.host.tree_digest() == before
    assert [e["state"] for e in deploy.journal()][-1] == "rolled_back"
    nothing = deploy.cli("rollback", "-H", "host0")
    assert nothing.returncode == 2 and "no committed deploy" in nothing.stderr
    for _ in range(3):  # three more deploy/rollback cycles: backups pile up, then prune
        assert deploy.cli("push", "-H", "host0", "--no-restart").returncode == 0
        assert deploy.cli("rollback", "-H", "host0", "--no-restart").returncode == 0
    backups = deploy.host.state_dir_on_disk / "backups"
    assert len(list(backups.iterdir())) == 4
    assert deploy.cli("backups", "prune", "-H", "host0", "--keep", "2", "--yes").returncode == 0
    assert len(list(backups.iterdir())) == 2
    mode = backups.stat().st_mode & 0o777
    assert (
        mode == 0o700
        and (deploy.host.state_dir_on_disk / "journal.jsonl").stat().st_mode & 0o777 == 0o600
    )


def test_dry_runs_over_ssh_say_what_they_would_do_and_change_nothing(deploy):
    """rollback/recover/backups prune --dry-run on a real sshd host: the plan of each, and
    the host's files, journal and backups untouched (tests/cli/test_dry_run.py has the
    cases against a temp host's agent; this one goes through SSH and real sglang files)."""
    assert deploy.cli("push", "-H", "host0", "--no-restart").returncode == 0
    deploy_id = deploy.journal()[-1]["deploy_id"]
    state = deploy.host.state_dir_on_disk
    before = (deploy.host.tree_digest(), deploy.journal(), sorted(os.listdir(state / "backups")))
    rollback = deploy.cli("rollback", "-H", "host0", "--dry-run")
    assert rollback.returncode == 0, rollback.stderr
    assert f"would restore backup {deploy_id}" in rollback.stderr
    assert "sglang/srt/speculative/spec_info.py" in rollback.stderr
    recover = deploy.cli("recover", "-H", "host0", "--dry-run")
    assert recover.returncode == 0 and "nothing to recover" in recover.stderr
    prune = deploy.cli("backups", "prune", "-H", "host0", "--keep", "1", "--dry-run")
    assert prune.returncode == 0 and "nothing to delete: 1 backup(s)" in prune.stderr
    after = (deploy.host.tree_digest(), deploy.journal(), sorted(os.listdir(state / "backups")))
    assert after == before and not deploy.lock_file().exists()
    done = deploy.cli("rollback", "-H", "host0", "--no-restart")  # control: the real one
    assert done.returncode == 0 and deploy.host.tree_digest() != before[0]


def _summary(done) -> dict:
    return [json.loads(x) for x in done.stdout.splitlines() if '"summary"' in x][-1]


def test_a_journal_that_cannot_rotate_is_a_warning_in_the_summary_then_rotates(deploy, tmp_path):
    state = deploy.host.state_dir_on_disk
    state.mkdir(mode=0o700, exist_ok=True)
    old = write_journal(state / "journal.jsonl", journal_history(1300, pending=False))
    assert len(old) > JOURNAL_ROTATE_BYTES  # the precondition: past the bound
    os.chown(state / "journal.jsonl", state.stat().st_uid, state.stat().st_gid)
    (state / "journal.jsonl.2").write_text("an old journal\n")
    (state / "journal.jsonl.3").mkdir()  # shifting .2 onto a dir fails: rotation blocked
    table = tmp_path / "summary.md"

    done = deploy.cli("push", "-H", "host0", "--json", "--summary-file", str(table))
    assert done.returncode == 0, done.stderr  # housekeeping never fails a deploy
    summary = _summary(done)
    assert summary["data"]["outcome"] == "ok"
    (warning,) = summary["data"]["warnings"]
    assert warning.startswith("journal not rotated:") and "journal.jsonl" in warning
    assert summary["message"] == f"deployed (warning: {warning})"
    row = next(line for line in table.read_text().splitlines() if line.startswith("| host0"))
    assert "deployed (warning: journal not rotated:" in row
    assert "journal not rotated" in done.stderr  # the people's table too
    journal = state / "journal.jsonl"
    assert journal.read_bytes().startswith(old)  # the entries landed in the old journal
    assert [e["state"] for e in deploy.journal()][-2:] == ["installing", "committed"]

    (state / "journal.jsonl.3").rmdir()  # the blocker gone: the next append rotates
    back = deploy.cli("rollback", "-H", "host0", "--json")
    assert back.returncode == 0, back.stderr
    assert "warnings" not in _summary(back)["data"]  # the control: no warning without cause
    events = [json.loads(x) for x in back.stdout.splitlines()]
    rotated = [e for e in events if e["message"].startswith("journal rotated:")]
    assert len(rotated) == 1 and rotated[0]["data"]["journal_rotated"] > 0
    assert (state / "journal.jsonl.1").read_bytes().startswith(old)
    assert (state / "journal.jsonl.3").read_text() == "an old journal\n"
    assert len(journal.read_bytes()) < len(old) // 10
    assert [e["state"] for e in deploy.journal()][-1] == "rolled_back"
