"""Start and stop sandbox hosts: real sshd processes, each with its own /srv venv and sglang.

As root (what CI uses) every host's sshd runs in its own mount namespace with the host dir's
``srv``, ``home`` and ``state`` bind-mounted on ``/srv``, ``/root`` and
``/var/lib/ddtree-deploy``, so all hosts share the paths a real host has and listen on port
2222 of their own loopback address. Without root (or ``unshare``) each host keeps its files in
its own dir and listens on port 2222+i; the inventory then carries per-host paths.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from ddtree_sandbox.addresses import find_busy, find_free_block, hold_allocation_lock
from ddtree_sandbox.baseenv import (
    DEFAULT_SGLANG_VERSION,
    SYSTEM_PYTHON,
    BaseEnv,
    ensure_base_env,
)
from ddtree_sandbox.cpu_adapt import install_cpu_adapt
from ddtree_sandbox.docker_daemon import Daemon, start_daemon, stop_recorded_daemon
from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.inventory_file import InventoryHost, build_inventory, render_toml
from ddtree_sandbox.models import MODEL_KINDS, ModelSet, ensure_models
from ddtree_sandbox.processes import (
    find_children,
    read_cmdline,
    read_pid_file,
    stop_pid,
    stop_pid_file,
)
from ddtree_sandbox.service import (
    INITIAL_ALGORITHMS,
    REAL_SOURCE,
    SERVE_FILE_NAME,
    SERVICE_PORT,
    host_serve_args,
    host_serve_env,
    pristine_serve_file,
    stop_real_server,
    wait_healthy,
)
from ddtree_sandbox.serving import SERVING_VERSIONS, TP_SIZES
from ddtree_sandbox.sshd import (
    SSHD,
    SshdSpec,
    format_known_hosts_line,
    generate_keypair,
    launch_sshd,
    wait_sshd_ready,
)
from ddtree_sandbox.systemd_host import (
    UNIT,
    serve_file,
    start_container,
    start_unit,
    stop_container,
    unit_serve_args,
    write_stub_serve_file,
)

SSH_PORT = 2222
STUB_SOURCE = Path(__file__).with_name("sglang_stub.py")
STUB_MARKER = "sglang_stub.py"
# The service each sandbox host runs: "sglang" is a real `python -m sglang.launch_server` on a
# tiny model (CPU); "stub" is sglang_stub.py, kept for tests that need its fault knobs.
SERVICES = ("sglang", "stub")
# How the inventory runs the service: "command" (start/stop/status scripts) or "systemd"
# (a unit of real systemd: the host is a container with systemd as PID 1, systemd_host.py).
SERVICE_KINDS = ("command", "systemd")
DOCKER_RECORD = "docker.json"  # the private dockerd this sandbox started, if any
BASE_PTH_NAME = "ddtree-sandbox-base.pth"
# Sorts before BASE_PTH_NAME: site.py reads .pth files by name, so the overlay comes first.
OVERLAY_PTH_NAME = "ddtree-sandbox-0-overlay.pth"
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
    service: str = "stub"
    models: ModelSet | None = None
    service_kind: str = "command"
    docker: Daemon | None = None  # the private dockerd of systemd hosts (docker_daemon.py)
    owns_docker: bool = False  # started by this sandbox: stop_sandbox stops it
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
        entries = [self._inventory_host(h) for h in self.hosts]
        data = build_inventory(entries, user, self.identity_file, self.known_hosts)
        path.write_text(render_toml(data))
        return path

    def _inventory_host(self, host: SandboxHost) -> InventoryHost:
        plain = InventoryHost(
            host.name, host.address, host.port, host.python, host.state_dir, host.service_dir,
            SERVICE_PORT,
        )  # fmt: skip
        if self.service_kind == "systemd":
            real = self.service == "sglang" and self.models is not None
            return replace(
                plain,
                service_kind="systemd",
                unit=UNIT,
                args_file=serve_file(host),
                serve_args=tuple(
                    host_serve_args(self.models, host, self.base_env.sglang_version)
                    if real and self.models is not None
                    else unit_serve_args(host, SERVICE_PORT)
                ),
                serve_env=(host_serve_env(self.models, host) if real and self.models else {}),
            )
        if self.service != "sglang" or self.models is None:
            return plain
        return replace(
            plain,
            service_script=REAL_SOURCE.name,
            args_file=f"{host.service_dir}/{SERVE_FILE_NAME}",
            serve_args=tuple(host_serve_args(self.models, host, self.base_env.sglang_version)),
            serve_env=host_serve_env(self.models, host),
        )

    def start_services(self, timeout_s: float = 300.0) -> None:
        """Start every host's service (one at a time: two cores) and wait until all are
        healthy; raise RuntimeError with the log tail of a host that does not come up."""
        for host in self.hosts:
            if self.service_kind == "systemd":
                start_unit(host)
                continue
            script = f"{host.service_dir}/{self.service_script}"
            done = host.run([host.python, script, "start"], timeout_s=60)
            if done.returncode != 0:
                raise RuntimeError(f"{host.name}: service start failed: {done.stderr[-2000:]}")
        for host in self.hosts:
            wait_healthy(host, timeout_s)

    @property
    def service_script(self) -> str:
        return REAL_SOURCE.name if self.service == "sglang" else STUB_SOURCE.name

    def stop(self) -> bool:
        """Stop every service and sshd this sandbox started; return True if none is left."""
        stopped = stop_sandbox(self.workdir)
        if self.owns_docker and self.docker is not None and self.docker.proc is not None:
            self._procs.append(self.docker.proc)  # reaped below
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
    first_octet: int | None = 11,
    names: Sequence[str] | None = None,
    base_env: BaseEnv | None = None,
    ready_timeout_s: float = 10.0,
    service: str = "sglang",
    models: Sequence[str] | None = None,
    initial_algorithm: str | None = "DFLASH",
    start_services: bool | None = None,
    customize: Callable[[SandboxHost, SshdSpec], SshdSpec] | None = None,
    service_kind: str = "command",
    docker: Daemon | None = None,
    tp_size: int = 1,
    model_recipe: dict[str, float | int] | None = None,
) -> Sandbox:
    """Start ``count`` hosts under ``workdir`` and write ``workdir/inventory.toml``.

    ``service="sglang"`` (the default) gives every host a REAL sglang server on a tiny model
    built locally (``models``: per host "target" (fp32, default), "target-bf16" or
    "control"), first serving ``initial_algorithm`` ("DFLASH" or None for plain greedy) from
    its serve file; the servers are started and healthy on return unless
    ``start_services=False``. ``service="stub"`` gives the sglang-shaped stub (fault knobs).

    Host i listens on 127.0.0.(``first_octet``+i); ``first_octet=None`` picks the first block
    of free addresses from .11 up (what tests use, so parallel sandboxes never collide).
    ``customize`` may change each host's sshd spec before launch (extra config lines, bind
    mounts, a network namespace: topology tests). ``service_kind="systemd"`` makes every
    host a Docker container with REAL systemd as PID 1 running its sshd and the server as
    ``sglang.service`` (systemd_host.py), the inventory saying ``kind = "systemd"``; the
    containers run on ``docker`` or on a private dockerd the sandbox starts (and stops).
    ``tp_size`` 2 serves each real sglang 0.5.23 server at ``--tp-size 2`` (one core per
    rank, serving.TP_ENV); ``model_recipe`` builds the tiny models from another recipe
    (models.DEFAULT_RECIPE's keys, e.g. ``{"vocab_size": 62}``: two real TP shards).

    Leftovers of an earlier sandbox in ``workdir`` are stopped and replaced. Raises
    RuntimeError if an address is taken or an sshd does not come up (everything started is
    stopped first).
    """
    names = list(names) if names is not None else [f"host{i}" for i in range(count)]
    if len(names) != count:
        raise ValueError(f"{count} hosts but {len(names)} names")
    if service not in SERVICES:
        raise ValueError(f"service must be one of {SERVICES}, got {service!r}")
    if service == "sglang" and sglang_version not in SERVING_VERSIONS:
        raise ValueError(
            f"a real sglang server in the sandbox needs sglang {' or '.join(SERVING_VERSIONS)} "
            f"(the CPU adaptation fixture targets their modules); for {sglang_version} use the "
            "stub service"
        )
    serves_tp = (service, sglang_version) == ("sglang", "0.5.23")
    if tp_size not in TP_SIZES or (tp_size > 1 and not serves_tp):
        raise ValueError(f"tp_size: one of {TP_SIZES}, > 1 only for real sglang 0.5.23 servers")
    if service_kind not in SERVICE_KINDS:
        raise ValueError(f"service_kind: one of {SERVICE_KINDS}, got {service_kind!r}")
    if service_kind == "systemd" and not can_namespace():
        raise RuntimeError("systemd sandbox hosts need root (a private dockerd, containers)")
    host_models = list(models) if models is not None else ["target"] * count
    if len(host_models) != count or not set(host_models) <= set(MODEL_KINDS):
        raise ValueError(f"models: {count} of {MODEL_KINDS}, got {host_models}")
    if initial_algorithm not in INITIAL_ALGORITHMS:
        raise ValueError(f"initial_algorithm must be one of {INITIAL_ALGORITHMS}")
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
    model_set = ensure_models(base_env, model_recipe) if service == "sglang" else None
    timings_s["models_s"] = time.monotonic() - started - timings_s["base_env_s"]
    identity_file = workdir / "id_ed25519"
    authorized_keys = workdir / "authorized_keys"
    authorized_keys.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(generate_keypair(identity_file, "ddtree-sandbox-client"), authorized_keys)
    mark = time.monotonic()
    hostdirs = [workdir / "hosts" / name for name in names]
    with ThreadPoolExecutor(max_workers=min(max(count, 1), 8)) as pool:
        list(pool.map(lambda hostdir: _prepare_hostdir(hostdir, base_env, service), hostdirs))
    timings_s["prepare_hosts_s"] = time.monotonic() - mark
    mark = time.monotonic()
    with hold_allocation_lock():
        octet = _pick_first_octet(count, first_octet, namespaced)
        hosts = [
            SandboxHost(
                name=name,
                address=f"127.0.0.{octet + i}",
                port=SSH_PORT if namespaced else SSH_PORT + i,
                hostdir=hostdir,
                namespaced=namespaced,
                model=host_models[i],
                tp_size=tp_size,
            )
            for i, (name, hostdir) in enumerate(zip(names, hostdirs, strict=True))
        ]
        sandbox = Sandbox(
            workdir=workdir,
            hosts=hosts,
            identity_file=identity_file,
            known_hosts=workdir / "known_hosts",
            inventory_path=workdir / "inventory.toml",
            base_env=base_env,
            namespaced=namespaced,
            timings_s=timings_s,
            service=service,
            models=model_set,
            service_kind=service_kind,
            docker=docker,
        )
        try:
            for host in hosts:
                if service_kind == "systemd" and model_set is None:
                    write_stub_serve_file(host, SERVICE_PORT)
                if model_set is not None:
                    text = pristine_serve_file(
                        model_set, host, initial_algorithm, base_env.sglang_version
                    )
                    (host.service_dir_on_disk / SERVE_FILE_NAME).write_text(text)
                    continue
                host.stub_config_on_disk.write_text(
                    json.dumps({"host": host.address, **DEFAULT_STUB_CONFIG}, indent=2) + "\n"
                )
            specs = [host.sshd_spec(authorized_keys) for host in hosts]
            if customize is not None:
                specs = [customize(h, spec) for h, spec in zip(hosts, specs, strict=True)]
            if service_kind == "systemd":
                _start_systemd_hosts(sandbox, specs)
            else:
                sandbox._procs.extend(launch_sshd(spec) for spec in specs)
                for spec, proc in zip(specs, sandbox._procs, strict=True):
                    wait_sshd_ready(spec, proc, ready_timeout_s)
        except BaseException:
            sandbox.stop()
            raise
    timings_s["sshd_start_s"] = time.monotonic() - mark
    try:  # from here on, a failure must not leave sshds or servers behind
        known_lines = [
            format_known_hosts_line(h.address, h.port, h.sshd_spec(authorized_keys).host_key_pub)
            for h in hosts
        ]
        sandbox.known_hosts.write_text("\n".join(known_lines) + "\n")
        sandbox.write_inventory(sandbox.inventory_path)
        if start_services if start_services is not None else service == "sglang":
            mark = time.monotonic()
            sandbox.start_services()
            timings_s["services_start_s"] = time.monotonic() - mark
    except BaseException:
        sandbox.stop()
        raise
    timings_s["total_s"] = time.monotonic() - started
    return sandbox


def _start_systemd_hosts(sandbox: Sandbox, specs: Sequence[SshdSpec]) -> None:
    """Start each host's container (real systemd, its sshd a unit) on the sandbox's dockerd,
    starting a private one first when none was given; the hosts get their container ids."""
    if sandbox.docker is None:
        sandbox.docker = start_daemon(_new_docker_root(sandbox.workdir))
        sandbox.owns_docker = True
    image = sandbox.docker.ensure_image()
    script = sandbox.service_script
    for i, (host, spec) in enumerate(zip(sandbox.hosts, specs, strict=True)):
        container_id = start_container(sandbox.docker, image, host, spec, sandbox.service, script)
        sandbox.hosts[i] = replace(
            host, container=container_id, docker_host=sandbox.docker.host_url
        )


def _new_docker_root(workdir: Path) -> Path:
    """A short dir for a private dockerd (its socket path must stay under 108 bytes),
    recorded in ``workdir/docker.json`` so stop_sandbox finds it after a crash."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ddtree-docker-", dir="/tmp"))
    (workdir / DOCKER_RECORD).write_text(json.dumps({"root": str(root)}) + "\n")
    return root


def _pick_first_octet(count: int, first_octet: int | None, namespaced: bool) -> int:
    """Return a first octet whose whole block is free; raise RuntimeError if a fixed one isn't."""

    def endpoints_for(octet: int) -> list[tuple[str, int]]:
        pairs = []
        for i in range(count):
            address = f"127.0.0.{octet + i}"
            pairs += [(address, SSH_PORT if namespaced else SSH_PORT + i), (address, SERVICE_PORT)]
        return pairs

    if first_octet is None:
        return find_free_block(count, endpoints_for)
    busy = find_busy(endpoints_for(first_octet))
    if busy:
        taken = ", ".join(f"{address}:{port}" for address, port in busy)
        raise RuntimeError(f"sandbox addresses already in use: {taken} (another sandbox?)")
    return first_octet


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
        all_stopped &= stop_container(hostdir)  # a systemd host: its container, by id
        # The real server first: stop_pid_file drops a pid file whose process is not a stub.
        all_stopped &= stop_real_server(service_pid_file)
        all_stopped &= stop_pid_file(service_pid_file, STUB_MARKER)
        all_stopped &= _stop_sshd(hostdir)
    all_stopped &= stop_recorded_daemon(Path(workdir).resolve() / DOCKER_RECORD)
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


def make_host_venv(venv_dir: Path, base_env: BaseEnv) -> Path:
    """Create a sandbox host's venv at ``venv_dir``; return its site-packages.

    A plain venv from the system python, a .pth naming the base env (and the overlay, for
    an sglang that needs one), its own copy of the pristine sglang, and the CPU adaptation
    fixture (inert unless DDTREE_SANDBOX_CPU_ADAPT=1, which the sandbox's serve file sets).
    """
    subprocess.run(
        [str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv_dir)],
        check=True,
        capture_output=True,
    )
    site_packages = venv_dir / "lib" / "python3.11" / "site-packages"
    (site_packages / BASE_PTH_NAME).write_text(f"{base_env.site_packages}\n")
    if base_env.overlay_dir is not None:
        (site_packages / OVERLAY_PTH_NAME).write_text(f"{base_env.overlay_dir}\n")
    pristine = [p for p in sorted(base_env.sglang_dir.iterdir()) if p.name != "ready"]
    subprocess.run(
        ["cp", "-a", *map(str, pristine), str(site_packages)], check=True, capture_output=True
    )
    install_cpu_adapt(site_packages)
    return site_packages


def _prepare_hostdir(hostdir: Path, base_env: BaseEnv, service: str = "stub") -> None:
    """Lay out one host dir: srv/venv with the base .pth and its own sglang, the service script.

    ``stub.json`` or the serve file is written later, once the host's address is known.
    """
    shutil.rmtree(hostdir, ignore_errors=True)
    for sub in ("srv/service", "home", "state", "etc"):
        (hostdir / sub).mkdir(parents=True, exist_ok=True)
    make_host_venv(hostdir / "srv" / "venv", base_env)
    source = REAL_SOURCE if service == "sglang" else STUB_SOURCE
    shutil.copyfile(source, hostdir / "srv" / "service" / source.name)


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
