"""The container relay (agent/host/relay.py) through the real local transport and agent
bundle, with a fake runtime: a `docker` script on PATH whose `exec` runs the command right
here (no namespaces: tests/containers proves isolation on real Docker). It logs every verb,
so a test sees which side ran what. Its inspect is as long as a real one (6-10 KB: the relay
once read only its last 4000 characters) and warns on stderr, as a newer CLI does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ddtree_deploy.agent import AgentRequest, Op
from ddtree_deploy.errors import ContainerError, TransportError
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport import LocalTransport

FAKE_ID = "f" * 64
FAKE_RUNTIME = f"""#!{sys.executable}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
verb, name = sys.argv[1], sys.argv[-1] if sys.argv[1] != "exec" else sys.argv[3]
with open(os.path.join(here, "verbs.log"), "a") as fh:
    fh.write("%s %s\\n" % (verb, name))
if name != "box":
    sys.exit("Error: No such container: " + name)
if verb == "inspect":
    running = not os.path.exists(os.path.join(here, "stopped"))
    print(json.dumps([{{"Id": "{FAKE_ID}", "Image": "sha256:0", "Config": {{"Image": "fake:1",
                       "Env": ["PAD%d=%s" % (i, "x" * 60) for i in range(120)]}},
                       "State": {{"Running": running, "Pid": 4242}}}}], indent=4))
    print("WARNING: the client is newer than the daemon", file=sys.stderr)
elif verb == "exec":
    try:
        os.execvp(sys.argv[4], sys.argv[4:])
    except OSError as exc:
        sys.exit(print("OCI runtime exec failed: %s" % exc, file=sys.stderr) or 127)
elif verb == "logs":
    print("the server's last words")
elif verb == "restart":
    print(name)
"""
SERVICE = {"kind": "container", "health_url": "http://127.0.0.1:9/health"}


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    """A bin dir first on PATH holding the fake `docker`; returns it (verbs.log inside)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(FAKE_RUNTIME)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return bin_dir


def call(tmp_path: Path, *ops: tuple[str, dict], **host_keys: object):
    table = {"address": "local", "transport": "local", "python": sys.executable,
             "host_python": sys.executable, "container": "box",
             "state_dir": str(tmp_path / "state"), **host_keys}  # fmt: skip
    host = parse_inventory({"hosts": {"c": table}}, "mem").hosts["c"]
    request = AgentRequest(state_dir=host.state_dir, ops=[Op(op=o, args=a) for o, a in ops])
    with LocalTransport(host) as transport:
        return transport.call(request)


def verbs(runtime: Path) -> list[str]:
    return (runtime / "verbs.log").read_text().split("\n")[:-1]


def test_restart_runs_on_the_host_between_two_container_agents(runtime, tmp_path):
    answer = call(tmp_path, ("facts", {}), ("restart", {"service": SERVICE}), ("facts", {}))
    assert answer.ok, answer
    first, restarted, second = answer.results
    assert restarted.data["container"]["id"] == FAKE_ID
    assert first.data["container"]["image"] == second.data["container"]["image"] == "fake:1"
    assert first.data["agent_pid"] != second.data["agent_pid"]  # a fresh agent after it
    assert verbs(runtime) == [
        "inspect box", "exec box", "restart box", "inspect box", "inspect box", "exec box",
    ]  # fmt: skip


def test_a_failed_container_health_check_carries_the_containers_log(runtime, tmp_path):
    service = dict(SERVICE, ready_timeout_s=0.2, poll_interval_s=0.1)
    answer = call(tmp_path, ("health", {"service": service}))
    assert answer.failed is not None and answer.failed.code == "unhealthy"
    assert answer.failed.data["log"].strip() == "the server's last words"


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"container": "nosuch"}, "no container 'nosuch' on the host"),
        ({"python": "/nonexistent/python3"}, "cannot start the agent's python"),
        ({"container_runtime": "podman"}, "container runtime 'podman' not found"),
        ({"host_python": "/nonexistent/python3"}, "/nonexistent/python3"),
    ],
)
def test_an_agent_that_cannot_start_is_a_container_error(runtime, tmp_path, keys, message):
    with pytest.raises(ContainerError, match=message):
        call(tmp_path, ("facts", {}), **keys)
    assert not (tmp_path / "state").exists()


def test_a_stopped_container_is_refused(runtime, tmp_path):
    (runtime / "stopped").touch()
    with pytest.raises(ContainerError, match="container 'box' is not running"):
        call(tmp_path, ("facts", {}))
    assert verbs(runtime) == ["inspect box"]  # nothing was exec'd


def test_an_agent_that_dies_mid_request_is_a_lost_link(runtime, tmp_path):
    dying = tmp_path / "dying-python"
    dying.write_text("#!/bin/sh\nhead -c 1 >/dev/null\nexit 1\n")
    dying.chmod(0o755)
    with pytest.raises(TransportError, match="died without an answer") as caught:
        call(tmp_path, ("facts", {}), python=str(dying))
    assert not isinstance(caught.value, ContainerError)
