"""Sandbox hosts that run their server in REAL Docker containers (the private dockerd).

``docker_login_env`` is a ``start_sandbox(customize=...)`` hook: the host's sshd gives every
login ``DOCKER_HOST`` of the sandbox's private dockerd (docker_daemon.py), so the agent's
relay runs the machine's real ``docker`` CLI against it. ``Containers`` drives that daemon
for one host and reads what tests check: a container's writable layer (overlay2's upper
dir), its root as the machine sees it, the daemon's events for it (exec, restart, die),
its log.

The image ``sglang-sandbox`` is the sandbox's Debian bookworm image plus the host's own
``/srv`` tree copied in (venv with its own sglang, the stub server and its stub.json), so a
patch lands in a container's writable layer and a recreated container starts from the
image's files again. The venv's base .pth points at /opt/ddtree-sandbox, bind-mounted
read-only; the state dirs are a volume (the host's state dir), so the journal outlives a
recreated container, as docs/hosts.md tells operators to set it up. A container runs on the
machine's network (``network_host``) or in its own network namespace with a loopback only
(``--network none``): never a bridge, never a private-range address.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_sandbox.docker_daemon import Daemon
from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.sshd import SshdSpec

IMAGE = "sglang-sandbox"
OPT = "/opt/ddtree-sandbox"
STATE_DIR = "/var/lib/ddtree-deploy"  # a volume (the host's state dir), as docs/hosts.md asks
STUB_MAIN = ("/srv/venv/bin/python", "/srv/service/sglang_stub.py", "serve")


def docker_login_env(daemon: Daemon) -> Callable[[SandboxHost, SshdSpec], SshdSpec]:
    """The customize hook: every login on the host talks to ``daemon``."""

    def customize(host: SandboxHost, spec: SshdSpec) -> SshdSpec:
        extra = (*spec.extra_config, f"SetEnv DOCKER_HOST={daemon.host_url}")
        return dataclasses.replace(spec, extra_config=extra)

    return customize


def build_image(daemon: Daemon, host: SandboxHost, base: str) -> str:
    """``docker build`` the host's image: ``base`` plus the host's /srv; return its id.

    The legacy builder (DOCKER_BUILDKIT=0): it needs no registry and no buildx plugin."""
    dockerfile = f"FROM {base}\nCOPY . /srv/\nCMD {list(STUB_MAIN)!r}\n".replace("'", '"')
    env = {**daemon.env(), "DOCKER_BUILDKIT": "0"}
    done = subprocess.run(
        ["docker", "build", "-q", "-t", IMAGE, "-f", "-", str(host.hostdir / "srv")],
        input=dockerfile, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"docker build {IMAGE}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Containers:
    """The real containers of one sandbox host (controller-side helpers for tests)."""

    host: SandboxHost
    daemon: Daemon

    def docker(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run docker against the sandbox's daemon; never raises."""
        return self.daemon.docker(*args, timeout_s=timeout_s)

    def run(self, name: str, network_host: bool = False, restart: str = "no") -> str:
        """Start container ``name`` from the host's image, the stub server as its main
        process (``restart``: its restart policy); return its id. Raises RuntimeError."""
        network = "host" if network_host else "none"
        self.docker("rm", "-f", name)  # a crashed run's container of that name
        done = self.docker(
            "run", "-d", "--name", name, "--restart", restart, "--network", network,
            "-v", f"{OPT}:{OPT}:ro", "-v", f"{self.host.state_dir_on_disk}:{STATE_DIR}",
            IMAGE, *STUB_MAIN,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"docker run {name}: {done.stderr}")
        container_id = done.stdout.strip()
        self.daemon.started.append(container_id)
        return container_id

    def remove(self, name: str) -> None:
        """``docker rm -f``: the container and its writable layer are gone."""
        self.docker("rm", "-f", name)

    def inspect(self, name: str) -> dict[str, Any]:
        import json

        done = self.docker("inspect", "--type", "container", name)
        if done.returncode != 0:
            raise RuntimeError(f"docker inspect {name}: {done.stderr}")
        found: dict[str, Any] = json.loads(done.stdout)[0]
        return found

    def upper_dir(self, name: str) -> Path:
        """The container's writable layer (overlay2's upper dir), as the machine sees it."""
        return Path(self.inspect(name)["GraphDriver"]["Data"]["UpperDir"])

    def root(self, name: str) -> Path:
        """The container's root as the machine sees it (/proc/PID/root of its init)."""
        return Path(f"/proc/{self.inspect(name)['State']['Pid']}/root")

    def events(self, name: str, since: float) -> list[str]:
        """The daemon's events for container ``name`` since ``since`` (epoch s), oldest
        first, as ``ACTION`` (``exec_start: /srv/venv/bin/python ...``, ``restart``)."""
        done = self.docker(
            "events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}",
            "--filter", f"container={name}", "--format", "{{.Action}}",
        )  # fmt: skip
        return [line for line in done.stdout.splitlines() if line]

    def console(self, name: str) -> str:
        """The container's log (its main process's stdout and stderr)."""
        done = self.docker("logs", name)
        return done.stdout + done.stderr

    def remove_all(self, names: Iterable[str]) -> None:
        for name in names:
            self.remove(name)


def tree_sha256(top: Path, skip: Iterable[str] = ("__pycache__",)) -> dict[str, str]:
    """{relative path: sha256} of every file under ``top`` (dirs named in ``skip`` left out)."""
    digests: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if path.is_file():
                digests[str(path.relative_to(top))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests
