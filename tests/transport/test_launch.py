"""The agent's argv per host (transport/launch.py) and which ops a container host's relay
runs on the host (agent/host/wire_container.py): pure, no host needed."""

from __future__ import annotations

import pytest

from ddtree_deploy.agent.host.wire_container import ContainerSpec, read_inspect, runs_on_host
from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport.launch import agent_argv, container_spec


def host(**keys):
    table = {"address": "gpu7", "python": "/opt/conda/bin/python", **keys}
    return parse_inventory({"hosts": {"h": table}}, "mem").hosts["h"]


def test_plain_host_runs_its_python_and_names_no_container():
    plain = host()
    assert agent_argv(plain)[:2] == ["/opt/conda/bin/python", "-c"]
    assert container_spec(plain) is None


def test_container_host_starts_the_hosts_python_and_relays_into_the_container():
    boxed = host(container="sglang-0", host_python="/usr/bin/python3", become="sudo")
    argv = agent_argv(boxed)
    assert argv[:7] == ["sudo", "-n", "-u", "root", "--", "/usr/bin/python3", "-c"]
    spec = ContainerSpec.from_dict(container_spec(boxed))
    assert spec.argv[:6] == ["docker", "exec", "-i", "sglang-0", "/opt/conda/bin/python", "-c"]
    assert spec.argv[6] == argv[7]  # the same bootstrap on both sides
    podman = ContainerSpec.from_dict(
        container_spec(host(container="c", container_runtime="podman"))
    )
    assert podman.argv[:4] == ["podman", "exec", "-i", "c"]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"container": "-it"}, "container"),
        ({"container": "a b"}, "container"),
        ({"service": {"kind": "container"}}, "needs the host's 'container'"),
        ({"container": "c", "host_python": "python3"}, "absolute"),
    ],
)
def test_bad_container_keys_are_inventory_errors(keys, message):
    with pytest.raises(InventoryError, match=message):
        host(**keys)


def test_only_a_container_services_restart_runs_on_the_host():
    service = {"kind": "container", "health_url": "http://127.0.0.1:30000/health"}
    assert runs_on_host({"op": "restart", "args": {"service": service}})
    assert not runs_on_host({"op": "health", "args": {"service": service}})
    command = dict(service, kind="command")
    assert not runs_on_host({"op": "restart", "args": {"service": command}})
    assert not runs_on_host({"op": "facts", "args": {}})


def test_inspect_output_of_docker_and_podman():
    spec = ContainerSpec(runtime="docker", name="sg0", argv=[])
    docker = [{"Id": "ab" * 32, "Image": "sha256:" + "0" * 64,
               "Config": {"Image": "lmsysorg/sglang:latest"},
               "State": {"Running": True, "Pid": 42, "StartedAt": "2026-11-30"}}]  # fmt: skip
    found = read_inspect(spec, docker)
    assert (found.id, found.image, found.running, found.pid) == (
        "ab" * 32,
        "lmsysorg/sglang:latest",
        True,
        42,
    )
    podman = [{"Id": "cd" * 32, "ImageName": "docker.io/lmsysorg/sglang:v0.5",
               "State": {"Running": False, "Pid": 0}}]  # fmt: skip
    found = read_inspect(spec, podman)
    assert (found.image, found.running, found.pid) == (
        "docker.io/lmsysorg/sglang:v0.5",
        False,
        None,
    )
    with pytest.raises(ValueError):
        read_inspect(spec, [])
