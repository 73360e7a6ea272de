"""The harness's private dockerd (sandbox/ddtree_sandbox/docker_daemon.py): a missing docker.io
is an error naming it (never a skip); the image's cache key follows its recipe; a daemon
this harness started is gone after `stop`, with every container it ran, and nothing of it
is on a bridge or a private-range address."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from ddtree_sandbox import docker_daemon
from ddtree_sandbox.processes import is_running, read_pid_file


def test_a_missing_docker_is_an_error_naming_the_package(monkeypatch, tmp_path):
    real_which = shutil.which
    monkeypatch.setattr(
        docker_daemon.shutil, "which", lambda name: None if name == "dockerd" else real_which(name)
    )
    with pytest.raises(RuntimeError, match="dockerd missing: install docker.io"):
        docker_daemon.start_daemon(tmp_path / "d")


def test_the_cache_key_follows_the_recipe():
    key = docker_daemon.recipe_key()
    assert key == docker_daemon.recipe_key(tuple(reversed(docker_daemon.PACKAGES)))
    assert key != docker_daemon.recipe_key((*docker_daemon.PACKAGES, "curl"))
    assert docker_daemon.image_tag().endswith(":" + key)


@pytest.mark.hosts  # root, docker.io, debootstrap
def test_stop_ends_the_daemon_and_removes_its_containers(base_env):
    root = Path(tempfile.mkdtemp(prefix="ddtree-docker-", dir="/tmp"))
    daemon = docker_daemon.start_daemon(root)
    try:
        image = daemon.ensure_image()
        container = daemon.run_container(image, "sleep", "600")
        found = json.loads(daemon.check("inspect", container))[0]
        assert found["HostConfig"]["NetworkMode"] == "host"
        assert "bridge" not in daemon.check("network", "ls", "--format", "{{.Name}}").split()
        inside = int(found["State"]["Pid"])
        pid = read_pid_file(daemon.pid_file)
        assert pid is not None and is_running(pid)
    finally:
        assert daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not is_running(pid) and not is_running(inside)
    assert not any(str(root) in line for line in Path("/proc/self/mounts").read_text().splitlines())
