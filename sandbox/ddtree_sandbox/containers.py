"""Sandbox hosts that run their server in a "container": the TEST-ONLY docker stand-in.

``with_docker_standin`` is a ``start_sandbox(customize=...)`` hook: it puts
``docker_standin.py`` (a test fixture, not Docker) on the host as ``docker``, first on the
PATH of its logins (a bind mount over ``/usr/local/sbin``, so a real docker CLI in
``/usr/local/bin`` is never reached there). ``Containers`` drives the stand-in on one host
and reads what tests check: a container's writable layer, its view of the files, the verbs
the stand-in was asked to run. An image is the host's own ``/srv`` tree (venv with sglang
and the stub server), the container's read-only lower dir.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.sshd import SshdSpec

STANDIN_SOURCE = Path(__file__).with_name("docker_standin.py")
STANDIN_BIN = "/usr/local/sbin"  # first on the PATH sshd gives a login
DOCKER = f"{STANDIN_BIN}/docker"
IMAGE = "sglang-sandbox"
STUB_MAIN = ("/srv/venv/bin/python", "/srv/service/sglang_stub.py", "serve")


def standin_bin_dir(host: SandboxHost) -> Path:
    return host.hostdir / "docker-bin"


def standin_state_dir(host: SandboxHost) -> Path:
    return host.hostdir / "docker-state"


def with_docker_standin(host: SandboxHost, spec: SshdSpec) -> SshdSpec:
    """The customize hook: install the stand-in as the host's ``docker``, with the host's
    ``/srv`` registered as image ``sglang-sandbox``; return the spec with its bind mount."""
    bin_dir, state = standin_bin_dir(host), standin_state_dir(host)
    bin_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("containers", "images"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STANDIN_SOURCE, bin_dir / "docker")
    (bin_dir / "docker").chmod(0o755)
    (bin_dir / "docker-standin.json").write_text(json.dumps({"state_dir": str(state)}))
    image = state / "images" / IMAGE
    if not image.exists():
        image.symlink_to(host.hostdir / "srv")
    binds = (*spec.extra_binds, (str(bin_dir), STANDIN_BIN))
    return dataclasses.replace(spec, extra_binds=binds)


@dataclass(frozen=True)
class Containers:
    """The stand-in's containers on one sandbox host (controller-side helpers for tests)."""

    host: SandboxHost

    def docker(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the host's ``docker`` (the stand-in) in its mount namespace; never raises."""
        return self.host.run([DOCKER, *args], timeout_s=timeout_s)

    def run(self, name: str, network_host: bool = False, restart: str = "no") -> str:
        """Start container ``name`` from the host's image, the stub server as its main
        process (``restart``: its restart policy); return its id. Raises RuntimeError when
        the stand-in fails."""
        network = ["--network", "host"] if network_host else []
        flags = ["--name", name, "--restart", restart, *network]
        done = self.docker("run", "-d", *flags, IMAGE, *STUB_MAIN)
        if done.returncode != 0:
            raise RuntimeError(f"docker run {name}: {done.stderr}")
        return done.stdout.strip()

    def remove(self, name: str) -> None:
        """``docker rm -f``: the container and its writable layer are gone."""
        self.docker("rm", "-f", name)

    def inspect(self, name: str) -> dict[str, Any]:
        done = self.docker("inspect", "--type", "container", name)
        if done.returncode != 0:
            raise RuntimeError(f"docker inspect {name}: {done.stderr}")
        found: dict[str, Any] = json.loads(done.stdout)[0]
        return found

    def upper_dir(self, name: str) -> Path:
        """The container's writable layer (its /srv changes), as the controller sees it."""
        return standin_state_dir(self.host) / "containers" / name / "upper"

    def root(self, name: str) -> Path:
        """The container's root as the controller sees it (/proc/PID/root of its init)."""
        return Path(f"/proc/{self.inspect(name)['State']['Pid']}/root")

    def verbs(self) -> list[str]:
        """The verbs the stand-in ran, oldest first (``restart sg0``, ``exec sg0 ...``)."""
        log = standin_state_dir(self.host) / "verbs.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split(" ", 1)[1] for line in lines]

    def console(self, name: str) -> str:
        log = standin_state_dir(self.host) / "containers" / name / "console.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def remove_all(self) -> None:
        """Stop and drop every container of this host (test teardown)."""
        containers = standin_state_dir(self.host) / "containers"
        for cdir in sorted(containers.iterdir()) if containers.is_dir() else []:
            self.remove(cdir.name)


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
