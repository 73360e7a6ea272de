"""The restart and health ops on a `systemd` service (the REAL agent bundle, real processes)
against REAL systemd 252: the agent runs inside a container whose PID 1 is systemd (the
session's private dockerd), through `docker exec -i` as its python, so its `systemctl` and
`journalctl` are systemd's own. A unit in a restart loop ends a 900 s wait at its first
restart (the real NRestarts grew), with the journal tail (systemd's "restart counter" line)
in the failure; a dead unit, likewise; a fail line in the journal ends it too; progress
comes from the new instance's journal lines only (after the real cursor). Controls: without
Restart= the same crash is a dead unit, not a loop; without fail patterns the same hang runs
out the (short) timeout. Pure parts: `systemctl show` and cursor parsing, and the verdict
(no NRestarts growth, no verdict)."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import service_systemd
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.stages import op_builders as ops
from tests.agent.conftest import oldest_python, start_fake_host
from tests.agent.test_service_bundle import free_port

CONTAINER_PYTHON = "/usr/bin/python3"  # Debian 12's 3.11 in the image

# srv.py MODE PORT: http (serves at once), progress (two sglang marks, then serves),
# crash (exits 1 0.5 s in, after a line), schedex (logs sglang's scheduler crash line and hangs).
SERVER = textwrap.dedent(
    """\
    import http.server, sys, time
    mode, port = sys.argv[1], int(sys.argv[2])
    def say(line):
        print(line, flush=True)
    if mode == "crash":  # after `systemctl is-active` said active (else the restart fails)
        time.sleep(0.5)
        say("[t] RuntimeError: deliberately crashed at start, key=SECRET-KEY-2")
        sys.exit(1)
    if mode == "schedex":
        say("[t] Scheduler hit an exception: deliberate")
        time.sleep(600)
    if mode == "progress":
        say("[t] Load weight end. elapsed=0.05 s")
        say("[t] The server is fired up and ready to roll!")
    http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler
                           ).serve_forever()
    """
)


@pytest.fixture(scope="module")
def systemd_box(docker_daemon, tmp_path_factory):
    """A container with real systemd as PID 1 on the machine's network; pytest's base temp
    dir is mounted at the same path (the agents' state dirs and the server script), and
    the python 3.8 of this machine (if any) read-only, for the oldest-host agent."""
    from ddtree_sandbox.systemd_host import SYSTEMD_FLAGS

    base = tmp_path_factory.getbasetemp()
    mounts = [f"-v={base}:{base}:rw"]
    old = oldest_python()
    if old is not None:
        prefix = Path(old).resolve().parents[1]
        mounts.append(f"-v={prefix}:{prefix}:ro")
    image = docker_daemon.ensure_image()
    box = docker_daemon.run_container(*SYSTEMD_FLAGS, *mounts, image, "/lib/systemd/systemd")
    for _ in range(100):
        state = docker_daemon.docker("exec", box, "systemctl", "is-system-running").stdout
        if state.strip() in ("running", "degraded"):
            break
        time.sleep(0.2)
    yield box
    docker_daemon.docker("rm", "-f", box)


def box_python(tmp_path: Path, daemon, box: str, python: str) -> str:
    """A `python` for the agent's LocalTransport: `docker exec -i` into the box, with the
    environment the test gives the agent (PYTHONPATH, the API key variable)."""
    wrapper = tmp_path / "box-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"DOCKER_HOST={daemon.host_url} exec docker exec -i -e PYTHONPATH -e WATCH_TEST_KEY "
        f'{box} {python} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture(params=["this_python", "oldest_python"])
def units(request, tmp_path, monkeypatch, systemd_box, docker_daemon):
    """(fake_host, make_host(mode, restart, **service keys)): a unit of the box's systemd;
    the agent runs in the box on its python 3.11, or on python 3.8 ("oldest_python")."""
    python = CONTAINER_PYTHON
    if request.param == "oldest_python":
        python = oldest_python() or ""
        if not python:
            pytest.skip("no python3.8 here (PATH or ~/.pyenv)")
    agent_python = box_python(tmp_path, docker_daemon, systemd_box, python)
    server = tmp_path / "srv.py"
    server.write_text(SERVER)
    port = free_port()
    monkeypatch.setenv("WATCH_TEST_KEY", "SECRET-KEY-2")
    unit_file = tmp_path / "demo.service"

    def install(text: str) -> None:
        unit_file.write_text(text)
        done = docker_daemon.docker(
            "exec", systemd_box, "/bin/sh", "-c",
            f"cp {unit_file} /etc/systemd/system/demo.service && systemctl daemon-reload",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def make_host(mode: str, restart: str = "on-failure", **keys: object) -> Host:
        (tmp_path / "serve.env").write_text(f'MODE="{mode}"\n')
        install(
            f"[Service]\nEnvironmentFile={tmp_path}/serve.env\n"
            f"ExecStart={CONTAINER_PYTHON} {server} $MODE {port}\n"
            f"Restart={restart}\nRestartSec=200ms\n"
        )
        spec = ServiceSpec(kind="systemd", unit="demo.service", poll_interval_s=0.1,
                           health_url=f"http://127.0.0.1:{port}/", **keys)  # fmt: skip
        return Host(name="x", address="local", service=spec,
                    smoke={"api_key_env": "WATCH_TEST_KEY"})  # fmt: skip

    for fake_host in start_fake_host(tmp_path, monkeypatch, agent_python):
        yield fake_host, make_host
    docker_daemon.docker("exec", systemd_box, "systemctl", "stop", "demo.service")


def restart_and_health(fake_host, host: Host):
    return fake_host.call_ops(*[op for _, op in ops.service_ops(host)])


@pytest.mark.hosts  # root and the private dockerd
def test_a_restart_loop_ends_a_900_s_wait_at_the_first_restart_and_the_control_dies(units):
    fake_host, make_host = units
    started = time.monotonic()
    answer = restart_and_health(fake_host, make_host("crash", ready_timeout_s=900,
                                                     fail_patterns=[]))  # fmt: skip
    waited = time.monotonic() - started
    failed = answer.failed
    assert failed.op == "health" and failed.code == Code.UNHEALTHY, answer
    # NRestarts is read after `is-active`: on a loaded machine the first crash may already
    # be counted then (1 -> 2); either way the loop ends the 900 s wait at once
    assert "restart loop" in failed.error, failed.error
    assert re.search(r"NRestarts (\d+) -> (\d+)", failed.error), failed.error
    assert "restart counter is at 1" in failed.data["log"]  # the journal tail
    assert "deliberately crashed" in failed.data["log"]
    assert "SECRET-KEY-2" not in failed.data["log"]  # redacted, as for a log_file
    assert waited < 60, waited
    # control: Restart=no, the same crash leaves the unit failed: dead, not a loop
    control = make_host("crash", restart="no", ready_timeout_s=900, fail_patterns=[])
    answer = restart_and_health(fake_host, control)
    assert "died while starting" in answer.failed.error, answer.failed.error
    assert "ActiveState=failed" in answer.failed.error


@pytest.mark.hosts  # root and the private dockerd
def test_a_fail_line_in_the_journal_ends_the_wait_and_without_patterns_it_runs_out(units):
    fake_host, make_host = units
    answer = restart_and_health(fake_host, make_host("schedex", ready_timeout_s=900))
    assert "fail pattern 'Scheduler hit an exception'" in answer.failed.error, answer.failed
    answer = restart_and_health(fake_host, make_host("schedex", ready_timeout_s=2,
                                                     fail_patterns=[]))  # fmt: skip
    assert "not ready after 2" in answer.failed.error, answer.failed.error


@pytest.mark.hosts  # root and the private dockerd
def test_progress_comes_from_the_new_instances_journal_lines_only(units):
    fake_host, make_host = units
    for _ in range(2):  # the second restart must not see the first instance's lines again
        answer = restart_and_health(fake_host, make_host("progress", ready_timeout_s=60))
        assert answer.ok, answer
        progress = answer.result("health").data["progress"]
        patterns = [p["pattern"] for p in progress]
        assert patterns == ["Load weight end", "The server is fired up and ready to roll"]


def test_show_and_cursor_parsing():
    state = service_systemd.parse_show("SubState=running\nNRestarts=3\nActiveState=active\n")
    assert state == {"SubState": "running", "NRestarts": "3", "ActiveState": "active"}
    assert service_systemd.n_restarts({}) == 0
    lines, cursor = service_systemd.split_cursor("a\nb\n-- cursor: s=1;i=2\n")
    assert (lines, cursor) == (["a", "b"], "s=1;i=2")
    assert service_systemd.split_cursor("") == ([], None)


def test_the_verdict_needs_a_dead_unit_or_a_grown_restart_counter():
    marker = {"cursor": None, "n_restarts": 2}
    looping = {"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "2"}
    assert service_systemd.unit_failure(looping, marker) is None  # not counted: no verdict
    grown = dict(looping, NRestarts="3")
    assert "NRestarts 2 -> 3" in service_systemd.unit_failure(grown, marker)
    dead = {"ActiveState": "failed", "SubState": "failed", "NRestarts": "2"}
    assert "died while starting" in service_systemd.unit_failure(dead, marker)
    assert service_systemd.unit_failure({}, marker) is None  # systemctl could not say
