"""One sandbox host running two REAL Docker containers (the session's private dockerd): sg0
in its own network namespace (`--network none`, a loopback only), sg1 on the machine's
network; inventory hosts c0 and c1 are those two containers behind the same SSH endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from ddtree_sandbox.containers import Containers, build_image, docker_login_env
from tests.support import run_cli

READY_LINE = "The server is fired up and ready to roll!"
CONTAINERS = {"c0": ("sg0", False), "c1": ("sg1", True)}  # host: (container, host network)


@dataclass
class Bench:
    """The sandbox, its stand-in containers and an inventory of the container hosts."""

    sandbox: Any
    containers: Containers
    inventory: Path
    tmp: Path

    @property
    def host(self) -> Any:
        return self.sandbox.hosts[0]

    def cli(self, *args: str, patchsets: Path | None = None) -> Any:
        extra = ["-i", str(self.inventory)]
        if patchsets is not None:
            extra += ["--patchsets-dir", str(patchsets)]
        return run_cli(*args, *extra, timeout=300)

    def start(self, name: str, network_host: bool = False) -> str:
        """`docker run` container `name` and wait for its stub server; return its id."""
        before = self.containers.console(name).count(READY_LINE)
        container_id = self.containers.run(name, network_host)
        wait_ready(self.containers, name, before)
        return container_id


def wait_ready(containers: Containers, name: str, seen: int, timeout_s: float = 90.0) -> None:
    """Wait until the container's stub server logs its ready line once more than `seen`."""
    deadline = time.monotonic() + timeout_s
    while containers.console(name).count(READY_LINE) <= seen:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not ready: {containers.console(name)[-2000:]}")
        time.sleep(0.2)


def container_inventory(sandbox: Any, path: Path, **overrides: dict[str, Any]) -> Path:
    """Write an inventory of the container hosts (CONTAINERS) on sandbox host 0; `overrides`
    replace keys per inventory host name. Returns `path`."""
    host = sandbox.hosts[0]
    url = f"http://{host.address}:30000"
    hosts = {}
    for name, (container, _net) in CONTAINERS.items():
        hosts[name] = {
            "address": host.address,
            "port": host.port,
            "container": container,
            "python": "/srv/venv/bin/python",
            "state_dir": f"/var/lib/ddtree-deploy/{container}",
            "groups": ["containers"],
            "service": {
                "kind": "container",
                "health_url": f"{url}/health_generate",
                "ready_timeout_s": 60,
                "poll_interval_s": 0.2,
            },
            "smoke": {"server_url": url},
            **overrides.get(name, {}),
        }
    defaults = {
        "user": "root",
        "identity_file": str(sandbox.identity_file),
        "known_hosts": str(sandbox.known_hosts),
    }
    path.write_text(tomli_w.dumps({"defaults": defaults, "hosts": hosts}))
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def summary(stdout: str, host: str) -> dict[str, Any]:
    return next(e for e in events(stdout) if e["stage"] == "summary" and e["host"] == host)


@pytest.fixture(scope="package")
def bench(base_env, docker_daemon, tmp_path_factory) -> Iterator[Bench]:
    from ddtree_sandbox import start_sandbox

    tmp = tmp_path_factory.mktemp("containers")
    sandbox = start_sandbox(tmp / "sandbox", 1, first_octet=None, base_env=base_env,
                            service="stub", customize=docker_login_env(docker_daemon))  # fmt: skip
    containers = Containers(sandbox.hosts[0], docker_daemon)
    names = [container for container, _net in CONTAINERS.values()]
    try:
        build_image(docker_daemon, sandbox.hosts[0], docker_daemon.ensure_image())
        inventory = container_inventory(sandbox, tmp / "inventory.toml")
        made = Bench(sandbox, containers, inventory, tmp)
        for container, network_host in CONTAINERS.values():
            containers.run(container, network_host)
        for container in names:  # both import sglang meanwhile
            wait_ready(containers, container, 0)
        yield made
    finally:
        containers.remove_all([*names, "sg2"])
        sandbox.stop()
