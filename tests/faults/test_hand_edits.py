"""Hand edits on real sshd hosts: after a push, an on-call engineer hot-fixes a patched file
(or the file the push added). `rollback`, `recover` and a fleet's undo must not write over
it: exit 2 naming each file and its hashes, nothing changed; `--force` first saves the
edited bytes beside the deploy's backup and says where; `status` shows the edit.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.runner import Push
from tests.fleet.conftest import parse_events, summaries
from tests.support import REPO, UTILS, make_patchset, run_cli

pytestmark = pytest.mark.hosts
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
EDITED = {"patched": SPEC_INFO, "added": UTILS}  # a file the push patched / added
HOTFIX = b"\n# on-call hotfix, not in any patchset\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Bench:
    """One sandbox host, the fast patchset, the CLI and what the host holds."""

    def __init__(self, sandbox, patchsets: Path):
        self.sandbox, self.patchsets = sandbox, patchsets
        self.host = sandbox.hosts[0]

    def cli(self, *args: str):
        extra = ["-i", str(self.sandbox.inventory_path)]
        if args[0] in ("push", "status"):
            extra += ["--patchsets-dir", str(self.patchsets)]
        return run_cli(*args, *extra)

    def file(self, rel: str) -> Path:
        return self.host.site_packages_on_disk / rel

    def result_sha256(self, rel: str) -> str:
        lock = json.loads((self.patchsets / "ddtree/1.0.0/patchset.lock.json").read_text())
        return lock["files"][rel]["result_sha256"]

    def journal(self) -> list[dict]:
        path = self.host.state_dir_on_disk / "journal.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def hand_edit(self, rel: str) -> bytes:
        path = self.file(rel)
        path.write_bytes(path.read_bytes() + HOTFIX)
        return path.read_bytes()


@pytest.fixture
def edits(sandbox_factory, tmp_path) -> Bench:
    return Bench(sandbox_factory(1), make_patchset(tmp_path / "fast"))


def drift_events(stdout: str) -> list[dict]:
    """The JSON events that carry hand edits (data.drift)."""
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e for e in events if (e.get("data") or {}).get("drift")]


@pytest.mark.parametrize("kind", list(EDITED))
def test_rollback_refuses_a_hand_edit_then_force_saves_it_beside_the_backup(edits, kind):
    rel = EDITED[kind]
    before = edits.host.tree_digest()
    assert edits.cli("push", "-H", "host0").returncode == 0
    edited = edits.hand_edit(rel)
    deploy_id = edits.journal()[-1]["deploy_id"]
    expected, found = edits.result_sha256(rel), sha256(edited)
    tree = edits.host.tree_digest()

    status = edits.cli("status", "-H", "host0", "--json")
    assert status.returncode == 1, status.stderr  # drift is a finding, like drift against -p
    assert f"hand-edited since {deploy_id}" in status.stderr and rel in status.stderr
    (shown,) = drift_events(status.stdout)
    assert shown["data"]["drift"] == [
        {"file": rel, "expected_sha256": expected, "found_sha256": found,
         "original_sha256": shown["data"]["drift"][0]["original_sha256"]}
    ]  # fmt: skip

    refused = edits.cli("rollback", "-H", "host0", "--json")
    assert refused.returncode == 2, refused.stderr
    said = " ".join(refused.stderr.split())  # the table folds long lines
    for text in (rel, expected, found, "--force"):
        assert text in said.replace(" ", "") or text in said, (text, refused.stderr)
    (event,) = drift_events(refused.stdout)
    assert [(d["file"], d["expected_sha256"], d["found_sha256"]) for d in event["data"]["drift"]] \
        == [(rel, expected, found)]  # fmt: skip
    assert edits.file(rel).read_bytes() == edited  # the hand edit is still there
    assert edits.host.tree_digest() == tree  # nothing changed on the host
    assert edits.journal()[-1]["state"] == "committed"
    assert not (edits.host.state_dir_on_disk / "lock").exists()

    forced = edits.cli("rollback", "-H", "host0", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert edits.host.tree_digest() == before  # rolled back
    backup = edits.host.state_dir_on_disk / "backups" / deploy_id
    (saved_dir,) = backup.glob("drifted-*")
    copy = saved_dir / "files" / rel
    assert copy.read_bytes() == edited  # the hand edit, byte for byte
    assert copy.stat().st_mode & 0o777 == 0o600
    listing = json.loads((saved_dir / "drifted.json").read_text())
    assert [d["found_sha256"] for d in listing["drift"]] == [found]
    on_host = f"/var/lib/ddtree-deploy/backups/{deploy_id}/{saved_dir.name}"
    assert on_host in " ".join(forced.stderr.split()).replace(" ", "") or on_host in forced.stderr
    (event,) = drift_events(forced.stdout)
    assert event["data"]["drift_saved"] == on_host
    assert edits.journal()[-1]["state"] == "rolled_back"


def test_recover_refuses_a_hand_edit_then_force_saves_it(fault_host, tmp_path):
    """A push killed after its install (the agent held at compile, the controller
    SIGKILLed) leaves `installing`; the engineer edits a patched file before anyone runs
    recover: recover refuses (exit 2), --force saves the edit and restores."""
    edits = Bench(fault_host.sandbox, make_patchset(tmp_path / "fast"))
    before = edits.host.tree_digest()
    fault_host.hold_at("compile")
    push = Push.start(edits.sandbox.inventory_path, edits.patchsets)
    fault_host.wait_paused(push.proc)
    os.kill(push.proc.pid, signal.SIGKILL)
    push.proc.wait()
    fault_host.release()
    fault_host.wait_agents_gone()
    assert edits.journal()[-1]["state"] == "installing"
    assert sha256(edits.file(UTILS).read_bytes()) == edits.result_sha256(UTILS)  # installed
    edited = edits.hand_edit(SPEC_INFO)
    tree = edits.host.tree_digest()

    refused = edits.cli("recover", "-H", "host0", "--json")
    assert refused.returncode == 2, refused.stderr
    (event,) = drift_events(refused.stdout)
    assert [(d["file"], d["expected_sha256"], d["found_sha256"]) for d in event["data"]["drift"]] \
        == [(SPEC_INFO, edits.result_sha256(SPEC_INFO), sha256(edited))]  # fmt: skip
    assert edits.host.tree_digest() == tree and edits.file(SPEC_INFO).read_bytes() == edited
    assert edits.journal()[-1]["state"] == "installing"  # still for recover to finish
    status = edits.cli("status", "-H", "host0", "--json")
    assert status.returncode == 3, status.stderr
    message = summaries(parse_events(status.stdout))["host0"].message
    assert message.endswith(": run recover"), message  # the lock's holder is dead

    forced = edits.cli("recover", "-H", "host0", "--force")
    assert forced.returncode == 0, forced.stderr
    assert edits.host.tree_digest() == before
    deploy_id = edits.journal()[-1]["deploy_id"]
    (copy,) = (edits.host.state_dir_on_disk / "backups" / deploy_id).glob(
        f"drifted-*/files/{SPEC_INFO}"
    )
    assert copy.read_bytes() == edited
    assert "hand-edited files saved in" in " ".join(forced.stderr.split())


def test_fleet_undo_leaves_a_hand_edited_host_alone_and_undoes_the_others(fleet_factory):
    """Waves of 2 with --max-fail 0: host0 and host1 commit, then host2 fails and the fleet
    undoes host0 and host1. host0 was hot-fixed after its commit: it is not overwritten and
    needs attention (exit 3, the drift named); host1 is rolled back."""
    fleet = fleet_factory(3)
    fleet.break_new_version_start("host2")
    before = {h.name: h.tree_digest() for h in fleet.hosts}
    inv = ["-i", str(fleet.sandbox.inventory_path), "--patchsets-dir", str(fleet.patchsets)]
    argv = [sys.executable, "-m", "ddtree_deploy", "push", *inv, "--all", "--json",
            "--batch", "2", "--parallel", "2", "--max-fail", "0"]  # fmt: skip
    target = fleet.hosts[0].site_packages_on_disk / SPEC_INFO
    lines, edited = [], None
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    for line in proc.stdout:
        lines.append(line)
        event = json.loads(line)
        if edited is None and (event["host"], event["stage"], event["event"]) == (
            "host0",
            "commit",
            "ok",
        ):
            target.write_bytes(target.read_bytes() + HOTFIX)
            edited = target.read_bytes()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=600) == 3, stderr
    assert edited is not None
    events = parse_events("".join(lines))
    ends = {host: e.data["outcome"] for host, e in summaries(events).items()}
    assert ends == {"host0": "needs_attention", "host1": "rolled_back", "host2": "rolled_back"}
    assert "changed on the host since deploy" in summaries(events)["host0"].message
    assert SPEC_INFO in summaries(events)["host0"].message
    drift = [e for e in events if e.host == "host0" and (e.data or {}).get("drift")]
    assert [d["file"] for d in drift[0].data["drift"]] == [SPEC_INFO]
    assert target.read_bytes() == edited  # not overwritten
    assert fleet.journal(fleet.hosts[0])[-1]["state"] == "committed"
    assert not (fleet.hosts[0].state_dir_on_disk / "lock").exists()
    for host in fleet.hosts[1:]:
        assert host.tree_digest() == before[host.name], host.name
