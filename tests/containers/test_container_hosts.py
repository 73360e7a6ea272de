"""Container hosts on a real sshd sandbox host whose containers are REAL Docker containers
(the session's private dockerd): a push lands in the container's writable layer and not on
the host, restart goes through `docker restart`, rollback restores, and a recreated
container (new id, patch gone) makes `status` say so (`status --check`: exit 3). The tests
run in order: each starts where the last one left."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_sandbox.containers import IMAGE, tree_sha256
from tests.containers.conftest import Bench, summary
from tests.support import make_patchset

pytestmark = pytest.mark.hosts
SITE = "venv/lib/python3.11/site-packages"  # under /srv: the image, the container's /srv
PATCHSET = "ddtree@1.0.0"
HEALTH_GET = '"GET /health_generate HTTP/1.1" 200'


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def results(patchsets: Path) -> dict[str, str]:
    lock = load_patchset(patchsets / "ddtree" / "1.0.0").lock
    return {path: f.result_sha256 for path, f in lock.files.items()}


def container_view(bench: Bench, name: str) -> dict[str, str]:
    """sha256 of every file of sglang as the container sees it (its own /srv overlay)."""
    return tree_sha256(bench.containers.root(name) / "srv" / SITE / "sglang")


def image_view(bench: Bench) -> dict[str, str]:
    """The same on the host: the image (the host's own /srv, the overlay's lower dir)."""
    return tree_sha256(bench.host.hostdir / "srv" / SITE / "sglang")


def runtime_verbs(bench: Bench, name: str, since: float) -> list[str]:
    """What the daemon did to container `name` since `since`: "exec" for each agent started
    in it (`docker exec` of its python), "restart" for each `docker restart`."""
    verbs = []
    for action in bench.containers.events(name, since):
        if action.startswith("exec_start: /srv/venv/bin/python"):
            verbs.append("exec")
        elif action == "restart":
            verbs.append("restart")
    return verbs


def journal_entries(bench: Bench, container: str) -> list[dict]:
    import json

    path = bench.host.state_dir_on_disk / container / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def patchsets(tmp_path_factory) -> Path:
    return make_patchset(tmp_path_factory.mktemp("patchsets"), suites=["integrity"])


def test_push_lands_in_the_container_and_restarts_it_through_the_runtime(bench, patchsets):
    containers, lock = bench.containers, results(patchsets)
    image_before = image_view(bench)
    assert container_view(bench, "sg0") == image_before  # the container starts as its image
    before = containers.inspect("sg0")
    since = time.time()
    sg1_polls = containers.console("sg1").count(HEALTH_GET)
    done = bench.cli("push", "-H", "c0", "-p", PATCHSET, "--json", patchsets=patchsets)
    assert done.returncode == 0, done.stderr
    verbs = runtime_verbs(bench, "sg0", since)
    assert summary(done.stdout, "c0")["data"]["outcome"] == "ok"
    upper = containers.upper_dir("sg0") / "srv" / SITE
    assert {p: sha256(upper / p) for p in lock} == lock  # in the writable layer
    view = bench.containers.root("sg0") / "srv" / SITE
    assert {p: sha256(view / p) for p in lock} == lock  # what the container sees
    assert image_view(bench) == image_before  # and NOT on the host
    assert container_view(bench, "sg1") == image_before  # nor in sg1 (same SSH endpoint)
    # one agent in the container until the runtime restarted it (host side), then one more
    assert verbs == ["exec", "restart", "exec"], verbs
    after = containers.inspect("sg0")
    assert after["Id"] == before["Id"]
    assert after["State"]["Pid"] != before["State"]["Pid"]  # the runtime restarted it
    # the restarted server imported the patched sglang (a module only the patch adds), and
    # health was polled where it listens: inside sg0's own network namespace. sg1 listens on
    # the same address and port in the host's network: a poll from the host would reach it.
    restarted = containers.console("sg0").rsplit("stub server starting", 1)[1]
    assert "imported sglang.srt.speculative.ddtree_utils" in restarted
    assert HEALTH_GET in restarted
    assert containers.console("sg1").count(HEALTH_GET) == sg1_polls
    committed = [e for e in journal_entries(bench, "sg0") if e["state"] == "committed"]
    assert committed[-1]["container_id"] == after["Id"]
    assert committed[-1]["image"] == IMAGE


def test_hosts_check_and_status_report_the_container(bench):
    sg0, sg1 = bench.containers.inspect("sg0"), bench.containers.inspect("sg1")
    done = bench.cli("hosts", "check", "-H", "c0", "-H", "c1", "--json")
    assert done.returncode == 0, done.stderr
    for host, found in (("c0", sg0), ("c1", sg1)):
        end = summary(done.stdout, host)
        assert f"container {found['Name'][1:]} {found['Id'][:12]} (image {IMAGE})" in end["message"]
        assert found["Id"][:12] in done.stderr  # the people's table names it too
    done = bench.cli("status", "-H", "c0", "--check", "--json")
    assert done.returncode == 0, done.stderr  # negative control: the patch is in place
    assert summary(done.stdout, "c0")["message"].startswith(f"deployed: {PATCHSET}; container sg0")


def test_rollback_restores_the_container_files(bench):
    image = image_view(bench)
    assert container_view(bench, "sg0") != image
    since = time.time()
    done = bench.cli("rollback", "-H", "c0", "--json")
    assert done.returncode == 0, done.stderr
    assert container_view(bench, "sg0") == image
    assert "restart" in runtime_verbs(bench, "sg0", since)


def test_recreated_container_makes_status_say_the_patch_is_gone(bench, patchsets):
    done = bench.cli("push", "-H", "c0", "-p", PATCHSET, "--json", patchsets=patchsets)
    assert done.returncode == 0, done.stderr
    old_id = bench.containers.inspect("sg0")["Id"]
    assert container_view(bench, "sg0") != image_view(bench)
    bench.containers.remove("sg0")
    new_id = bench.start("sg0")
    assert new_id != old_id
    assert container_view(bench, "sg0") == image_view(bench)  # a fresh layer: patch gone
    done = bench.cli("status", "-H", "c0", "--json")
    assert done.returncode == 0, done.stderr  # a report without --check
    message = summary(done.stdout, "c0")["message"]
    assert message.startswith(f"container recreated: patch gone (image {IMAGE};"), message
    assert old_id[:12] in message and new_id[:12] in message
    done = bench.cli("status", "-H", "c0", "--check")
    assert done.returncode == 3, done.stderr
    shown = done.stdout + done.stderr  # the status table is on stdout, the events on stderr
    assert "container recreated: patch gone" in shown
    assert old_id[:12] in shown and new_id[:12] in shown, shown
    print(f"\nstatus --check: exit 3; status says: {message}")
