"""Start and stop sandbox hosts: real sshd processes, each with its own /srv venv and sglang.

As root (what CI uses) every host's sshd runs in its own mount namespace with the host dir's
``srv``, ``home`` and ``state`` bind-mounted on ``/srv``, ``/root`` and
``/var/lib/ddtree-deploy``, so all hosts share the paths a real host has and listen on port
2222 of their own loopback address. Without root (or ``unshare``) each host keeps its files in
its own dir and listens on port 2222+i; the inventory then carries per-host paths.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_deploy.sandbox.baseenv import (
    DEFAULT_SGLANG_VERSION,
    SYSTEM_PYTHON,
    BaseEnv,
    ensure_base_env,
)
from ddtree_deploy.sandbox.inventory_file import InventoryHost, build_inventory, render_toml
from ddtree_deploy.sandbox.processes import (
    find_children,
    read_cmdline,
    read_pid_file,
    stop_pid,
    stop_pid_file,
)
from ddtree_deploy.sandbox.sshd import (
    SSHD,
    SshdSpec,
    format_known_hosts_line,
    generate_keypair,
    launch_sshd,
    wait_sshd_ready,
)

SSH_PORT = 2222
SERVICE_PORT = 30000
STUB_SOURCE = Path(__file__).with_name("sglang_stub.py")
STUB_MARKER = "sglang_stub.py"
BASE_PTH_NAME = "ddtree-sandbox-base.pth"
DEFAULT_STUB_CONFIG = {
    "port": SERVICE_PORT,
    "speculative_algorithm": "DDTREE",
    "ddtree_budget": 64,
    "accept_length": 3.2,
    "startup_delay_s": 0.5,
}


def can_namespace() -> bool:
    """Return True when hosts can get their own mount namespace (root with ``unshare``)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None


@dataclass(frozen=True)
class SandboxHost:
    """One sandbox host. ``python``/``state_dir``/``service_dir`` are the host's own view."""

    name: str
    address: str
    port: int
    hostdir: Path
    namespaced: bool

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
        """Run ``cmd`` (shell string or argv) inside this host's mount namespace; never raises
        on a non-zero exit. Outside root mode it runs directly, with the host's paths."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if self.namespaced:
            pid = self.sshd_pid()
            if pid is None:
                raise RuntimeError(f"{self.name}: sshd is not running, no namespace to enter")
            argv = ["nsenter", "-t", str(pid), "-m", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)

    def tree_digest(self, rel: str = "sglang") -> dict[str, str]:
        """Return {relative path: sha256} for every file under site-packages/``rel``,
        skipping ``__pycache__``; proves a tree is byte-identical before and after."""
        top = self.site_packages_on_disk / rel
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


@dataclass
class Sandbox:
    """Running sandbox hosts plus the client-side files the product needs to reach them."""

    workdir: Path
    hosts: list[SandboxHost]
    identity_file: Path
    known_hosts: Path
    inventory_path: Path
    base_env: BaseEnv
    namespaced: bool
    timings_s: dict[str, float] = field(default_factory=dict)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    def host(self, name: str) -> SandboxHost:
        return next(host for host in self.hosts if host.name == name)

    def ssh_argv(self, host: SandboxHost, command: str) -> list[str]:
        """Return an ``ssh`` argv that runs ``command`` on ``host`` with strict host keys."""
        user = "root" if self.namespaced else getpass.getuser()
        return [
            "ssh", "-i", str(self.identity_file), "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-p", str(host.port), f"{user}@{host.address}", command,
        ]  # fmt: skip

    def write_inventory(self, path: Path) -> Path:
        """Write the inventory TOML for these hosts to ``path``; return ``path``."""
        user = "root" if self.namespaced else getpass.getuser()
        entries = [
            InventoryHost(h.name, h.address, h.port, h.python, h.state_dir, h.service_dir,
                          SERVICE_PORT)
            for h in self.hosts
        ]  # fmt: skip
        data = build_inventory(entries, user, self.identity_file, self.known_hosts)
        path.write_text(render_toml(data))
        return path

    def stop(self) -> bool:
        """Stop every service and sshd this sandbox started; return True if none is left."""
        stopped = stop_sandbox(self.workdir)
        for proc in self._procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                stopped = False
        return stopped


def start_sandbox(
    workdir: Path,
    count: int,
    sglang_version: str = DEFAULT_SGLANG_VERSION,
    first_octet: int = 11,
    names: Sequence[str] | None = None,
    base_env: BaseEnv | None = None,
    ready_timeout_s: float = 10.0,
) -> Sandbox:
    """Start ``count`` hosts under ``workdir`` and write ``workdir/inventory.toml``.

    Leftovers of an earlier sandbox in ``workdir`` are stopped and replaced. Raises
    RuntimeError if an sshd does not come up (everything started is stopped first).
    """
    names = list(names) if names is not None else [f"host{i}" for i in range(count)]
    if len(names) != count:
        raise ValueError(f"{count} hosts but {len(names)} names")
    if not SSHD.exists():
        raise RuntimeError(f"{SSHD} is missing (install openssh-server)")
    workdir = Path(workdir).resolve()
    namespaced = can_namespace()
    if namespaced:
        _check_workdir_outside_mounts(workdir)
        _allow_root_key_login()
    started = time.monotonic()
    stop_sandbox(workdir)
    base_env = base_env or ensure_base_env(sglang_version)
    timings_s = {"base_env_s": time.monotonic() - started}
    hosts = [
        SandboxHost(
            name=name,
            address=f"127.0.0.{first_octet + i}",
            port=SSH_PORT if namespaced else SSH_PORT + i,
            hostdir=workdir / "hosts" / name,
            namespaced=namespaced,
        )
        for i, name in enumerate(names)
    ]
    identity_file = workdir / "id_ed25519"
    authorized_keys = workdir / "authorized_keys"
    shutil.copyfile(generate_keypair(identity_file, "ddtree-sandbox-client"), authorized_keys)
    mark = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(max(count, 1), 8)) as pool:
        list(pool.map(lambda host: _prepare_host(host, base_env), hosts))
    timings_s["prepare_hosts_s"] = time.monotonic() - mark
    sandbox = Sandbox(
        workdir=workdir,
        hosts=hosts,
        identity_file=identity_file,
        known_hosts=workdir / "known_hosts",
        inventory_path=workdir / "inventory.toml",
        base_env=base_env,
        namespaced=namespaced,
        timings_s=timings_s,
    )
    mark = time.monotonic()
    try:
        specs = [host.sshd_spec(authorized_keys) for host in hosts]
        sandbox._procs.extend(launch_sshd(spec) for spec in specs)
        for spec, proc in zip(specs, sandbox._procs, strict=True):
            wait_sshd_ready(spec, proc, ready_timeout_s)
    except BaseException:
        sandbox.stop()
        raise
    timings_s["sshd_start_s"] = time.monotonic() - mark
    known_lines = [
        format_known_hosts_line(h.address, h.port, h.hostdir / "etc" / "ssh_host_ed25519_key.pub")
        for h in hosts
    ]
    sandbox.known_hosts.write_text("\n".join(known_lines) + "\n")
    sandbox.write_inventory(sandbox.inventory_path)
    timings_s["total_s"] = time.monotonic() - started
    return sandbox


def stop_sandbox(workdir: Path) -> bool:
    """Stop the stub services and sshds recorded by pid files under ``workdir/hosts``.

    Works after a crashed run: it needs only the pid files, and it checks each pid's command
    line before signalling, so it never kills a process it did not start. Returns True if
    nothing of the sandbox is left running.
    """
    all_stopped = True
    hosts_dir = Path(workdir).resolve() / "hosts"
    for hostdir in sorted(hosts_dir.iterdir()) if hosts_dir.is_dir() else []:
        service_pid_file = hostdir / "srv" / "service" / "server.pid"
        all_stopped &= stop_pid_file(service_pid_file, STUB_MARKER)
        all_stopped &= _stop_sshd(hostdir)
    return all_stopped


def _stop_sshd(hostdir: Path) -> bool:
    pid_file = hostdir / "sshd.pid"
    pid = read_pid_file(pid_file)
    config_marker = str(hostdir / "etc" / "sshd_config")
    if pid is not None and config_marker in read_cmdline(pid):
        # Per-connection sshd children outlive the listener; stop them first.
        for child in reversed(find_children(pid)):
            stop_pid(child, timeout_s=2.0)
    return stop_pid_file(pid_file, config_marker)


def _prepare_host(host: SandboxHost, base_env: BaseEnv) -> None:
    """Lay out one host dir: srv/venv with the base .pth and its own sglang, the stub service."""
    shutil.rmtree(host.hostdir, ignore_errors=True)
    for sub in ("srv/service", "home", "state", "etc"):
        (host.hostdir / sub).mkdir(parents=True, exist_ok=True)
    venv_dir = host.hostdir / "srv" / "venv"
    subprocess.run(
        [str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv_dir)],
        check=True,
        capture_output=True,
    )
    site_packages = host.site_packages_on_disk
    (site_packages / BASE_PTH_NAME).write_text(f"{base_env.site_packages}\n")
    pristine = [p for p in sorted(base_env.sglang_dir.iterdir()) if p.name != "ready"]
    subprocess.run(
        ["cp", "-a", *map(str, pristine), str(site_packages)], check=True, capture_output=True
    )
    shutil.copyfile(STUB_SOURCE, host.service_dir_on_disk / "sglang_stub.py")
    config = {"host": host.address, **DEFAULT_STUB_CONFIG}
    host.stub_config_on_disk.write_text(json.dumps(config, indent=2) + "\n")


def _check_workdir_outside_mounts(workdir: Path) -> None:
    for mount_point in ("/root", "/srv", "/var/lib/ddtree-deploy"):
        if workdir == Path(mount_point) or Path(mount_point) in workdir.parents:
            raise ValueError(
                f"sandbox workdir {workdir} lies under {mount_point}, which hosts "
                "bind-mount over; use a dir elsewhere (e.g. under /tmp)"
            )


def _allow_root_key_login() -> None:
    """Make root usable for key logins when its password field is locked with '!'.

    With ``UsePAM no`` sshd refuses accounts whose shadow password starts with '!' even for
    key auth. Only then, set it to '*' (no password login possible, account unlocked). This
    changes /etc/shadow on the machine running the sandbox: test machines only.
    """
    for line in Path("/etc/shadow").read_text().splitlines():
        user, _, rest = line.partition(":")
        if user == "root" and rest.startswith("!"):
            subprocess.run(["usermod", "-p", "*", "root"], check=True, capture_output=True)
            return
