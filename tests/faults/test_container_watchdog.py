"""The start-up watchdog for a `container` service: the server in container sg2 (restart
policy on-failure, as serving containers usually run) crashes 3 s into its start on the new
code; the runtime restarts the container, which ends the agent waiting for health inside
it. The relay on the host inspects the container and fails health at once, naming the
restart, instead of waiting out ready_timeout_s (900 s here). The rollback then restores
the container's files and the server comes back on the old code. Real Docker (the session's
private dockerd), `--restart on-failure`. Measured here: health failed 20.2 s and 35.6 s
after the restart on 2 cores shared with other test runs (the server imports sglang, then
crashes 3 s later).
Slow (make faults); tests/agent/test_container_watch.py checks the verdicts in make test.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from tests.containers.conftest import Bench, events, summary, wait_ready
from tests.containers.test_container_hosts import container_view, image_view
from tests.support import make_patchset, run_cli, utils_file

pytestmark = [pytest.mark.hosts, pytest.mark.slow]  # make faults: ~75 s (a real sglang import)

CRASH = (
    "\nimport time as _time\n_time.sleep(3)\n"
    "raise RuntimeError('injected: the server crashes 3 s into its start')\n"
)


def _crashing(dest: Path) -> None:
    utils_file(dest).write_text(utils_file(dest).read_text() + CRASH)


@pytest.fixture
def sg2(bench: Bench, tmp_path):
    """Container sg2 (own network, restart policy on-failure) as inventory host c2."""
    bench.containers.run("sg2", restart="on-failure")
    wait_ready(bench.containers, "sg2", 0)
    data = tomllib.loads(bench.inventory.read_text())
    c2 = dict(data["hosts"]["c0"], container="sg2", state_dir="/var/lib/ddtree-deploy/sg2")
    c2["service"] = dict(c2["service"], ready_timeout_s=900)
    data["hosts"] = {"c2": c2}
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(tomli_w.dumps(data))
    try:
        yield inventory
    finally:
        bench.containers.remove("sg2")


def test_a_container_restarted_by_its_policy_fails_health_at_once(bench, sg2, tmp_path):
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"], mutate=_crashing)
    before = bench.containers.console("sg2").count("ready to roll")
    argv = ["-i", str(sg2), "--patchsets-dir", str(patchsets)]
    done = run_cli("push", "-H", "c2", "--json", *argv, timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    end = summary(done.stdout, "c2")
    assert end["data"]["outcome"] == "rolled_back", end
    health = [e for e in events(done.stdout) if e["stage"] == "health" and e["event"] == "fail"]
    assert health, [(e["stage"], e["event"], e.get("message")) for e in events(done.stdout)]
    said = health[0]["message"]
    assert "container 'sg2' was restarted by its restart policy while starting" in said, said
    assert "RestartCount 0 -> 1" in said, said
    waited = health[0]["duration_s"]
    # ready_timeout_s is 900; the wait includes the server's sglang import (10-30 s on 2
    # loaded cores) and its 3 s before the crash
    assert waited < 120, f"{waited:.1f}s: the wait was not cut short"
    print(f"\ncontainer restarted by its policy: health failed {waited:.1f} s after the restart")
    assert container_view(bench, "sg2") == image_view(bench)  # rolled back in the container
    wait_ready(bench.containers, "sg2", before)  # and serving on the old code again
