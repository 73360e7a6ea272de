"""One sandbox host: its paths (host view and controller view), namespace runner, digests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddtree_sandbox.processes import read_pid_file
from ddtree_sandbox.sshd import SshdSpec


@dataclass(frozen=True)
class SandboxHost:
    """One sandbox host. ``python``/``state_dir``/``service_dir`` are the host's own view."""

    name: str
    address: str
    port: int
    hostdir: Path
    namespaced: bool
    model: str = "target"  # the tiny model its real server serves (sandbox/models.py)
    tp_size: int = 1  # its real server's --tp-size (serving.TP_SIZES)
    # A systemd host (systemd_host.py): its container's id and the private dockerd's URL;
    # `run` then goes through `docker exec` instead of entering sshd's mount namespace.
    container: str | None = None
    docker_host: str | None = None

    @property
    def python(self) -> str:
        return str(self._host_path("srv/venv/bin/python", "/srv/venv/bin/python"))

    @property
    def site_packages(self) -> str:
        rel = "srv/venv/lib/python3.11/site-packages"
        return str(self._host_path(rel, "/" + rel))

    @property
    def state_dir(self) -> str:
        return str(self._host_path("state", "/var/lib/ddtree-deploy"))

    @property
    def service_dir(self) -> str:
        return str(self._host_path("srv/service", "/srv/service"))

    @property
    def site_packages_on_disk(self) -> Path:
        """The host's site-packages as the controller sees it (for digests and corruption)."""
        return self.hostdir / "srv" / "venv" / "lib" / "python3.11" / "site-packages"

    @property
    def state_dir_on_disk(self) -> Path:
        return self.hostdir / "state"

    @property
    def service_dir_on_disk(self) -> Path:
        return self.hostdir / "srv" / "service"

    @property
    def stub_config_on_disk(self) -> Path:
        return self.service_dir_on_disk / "stub.json"

    @property
    def sshd_pid_file(self) -> Path:
        return self.hostdir / "sshd.pid"

    def sshd_pid(self) -> int | None:
        """Return the host's sshd pid from its PidFile, or None."""
        return read_pid_file(self.sshd_pid_file)

    def run(
        self, cmd: str | Sequence[str], timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` (shell string or argv) inside this host's mount namespace (a systemd
        host: its container); never raises on a non-zero exit. Outside root mode it runs
        directly, with the host's paths."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if self.container is not None:
            env = {**os.environ, "DOCKER_HOST": self.docker_host or ""}
            argv = ["docker", "exec", self.container, *argv]
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
        if self.namespaced:
            pid = self.sshd_pid()
            if pid is None:
                raise RuntimeError(f"{self.name}: sshd is not running, no namespace to enter")
            argv = ["nsenter", "-t", str(pid), "-m", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)

    def tree_digest(self, rel: str = "sglang", root: Path | None = None) -> dict[str, str]:
        """Return {relative path: sha256} for every file under ``root``/``rel`` (default
        root: site-packages; an editable install's source tree, say), skipping
        ``__pycache__``; proves a tree is byte-identical before and after."""
        top = (root or self.site_packages_on_disk) / rel
        if top.is_file():
            return {rel: hashlib.sha256(top.read_bytes()).hexdigest()}
        digests: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for filename in sorted(filenames):
                path = Path(dirpath) / filename
                digests[path.relative_to(top).as_posix()] = hashlib.sha256(
                    path.read_bytes()
                ).hexdigest()
        return digests

    def read_stub_config(self) -> dict:
        return json.loads(self.stub_config_on_disk.read_text())

    def write_stub_config(self, **changes: object) -> dict:
        """Merge ``changes`` into the host's stub.json (read at the next stub start)."""
        config = {**self.read_stub_config(), **changes}
        self.stub_config_on_disk.write_text(json.dumps(config, indent=2) + "\n")
        return config

    def _host_path(self, rel: str, absolute: str) -> Path:
        return Path(absolute) if self.namespaced else self.hostdir / rel

    def sshd_spec(self, authorized_keys: Path) -> SshdSpec:
        return SshdSpec(self.hostdir, self.address, self.port, authorized_keys, self.namespaced)
