"""push_host on become and container hosts, through the FakeTransport's `_exec_agent` hook:
sudo's refusal, the relay's answers and the shell's "not found" are read by the base
transport exactly as over SSH (no SSH, no root, no container runtime)."""

from __future__ import annotations

from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.results import Outcome
from ddtree_deploy.transport import AgentExit
from tests.pipeline.fakehost import NOT_STARTED, RELAY_LOST, make_host, scene
from tests.pipeline.test_push_logic import (
    BACKUP,
    COMMIT,
    INSTALL,
    PREFLIGHT,
    RESTART,
    ROLLBACK_RESTART,
    SMOKE,
    push,
)

BOX = ServiceSpec(kind="container")
SUDO_SAID = AgentExit("", "sudo: a password is required\n", 1)


def sudo_host():
    return make_host(become="sudo", become_user="sglang")


def container_host():
    return make_host(service=BOX, container="sglang", host_python="/usr/bin/python3.11")


def test_sudo_refusing_the_agent_refuses_the_host_and_leaves_it_alone():
    s = scene(sudo_host(), connect=SUDO_SAID)
    result = push(s)
    assert result.outcome == Outcome.REFUSED
    assert "become: password required" in result.message and "NOPASSWD" in result.message
    assert result.details["become"] == "password required"
    assert s.fake.sent == [PREFLIGHT]  # nothing ran, so no unlock either
    assert s.transport.argvs[0][:4] == ["sudo", "-n", "-u", "sglang"]


def test_a_become_host_that_answers_deploys():
    s = scene(sudo_host())
    assert push(s).outcome == Outcome.OK
    assert all(argv[0] == "sudo" for argv in s.transport.argvs)


def test_every_request_to_a_container_host_names_its_container():
    s = scene(container_host())
    assert push(s).outcome == Outcome.OK
    specs = {r.container["name"] if r.container else None for r in s.transport.requests}
    assert specs == {"sglang"}
    assert s.transport.argvs[0][0] == "/usr/bin/python3.11"


def test_a_container_its_relay_cannot_start_is_refused_config():
    s = scene(container_host(), facts=NOT_STARTED)
    result = push(s)
    assert result.outcome == Outcome.REFUSED
    assert result.message == "refused: h1: container 'sglang': container 'sglang' is not running"
    assert s.fake.sent == [PREFLIGHT]


def test_the_containers_agent_lost_at_restart_rolls_back_like_a_lost_link():
    s = scene(container_host(), restart=RELAY_LOST)
    result = push(s)
    assert result.outcome == Outcome.ROLLED_BACK
    assert s.fake.sent == [PREFLIGHT, BACKUP + INSTALL, SMOKE, RESTART + COMMIT, ROLLBACK_RESTART]
    assert "container 'sglang'" in result.message


def test_a_hosts_python_that_is_not_there_is_refused_naming_the_key():
    missing = AgentExit("", "sh: 1: /usr/bin/python3: not found\n", 127)
    result = push(scene(connect=missing))
    assert result.outcome == Outcome.REFUSED
    assert "inventory key 'python' = '/usr/bin/python3'" in result.message
