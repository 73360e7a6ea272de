"""Sandbox hosts whose service is ``kind = "systemd"``: a Docker container with REAL systemd.

Each such host is a container of the sandbox's private dockerd (docker_daemon.py) running
``/lib/systemd/systemd`` as PID 1 on the machine's network (``--network host``; it listens
on its own 127.0.0.x address only). systemd there runs two units the sandbox writes:

- ``sandbox-sshd.service``: the host's sshd, with the same config, host key and authorized
  keys as every other sandbox host (sshd.py), so the controller reaches it the same way;
- ``sglang.service``: the server, as an operator would write it: ``EnvironmentFile=`` the
  host's serve file, ``ExecStart=`` the host's venv python running the real
  ``python -m sglang.launch_server $SGLANG_ARGS`` (service "sglang") or the stub server
  (service "stub", for its fault knobs), ``Restart=always``, ``RestartSec=500ms``.

The host's files are the same bind mounts the other sandbox hosts get (its ``srv``,
``state`` and ``home`` on ``/srv``, ``/var/lib/ddtree-deploy`` and ``/root``), plus the
sandbox's cached envs read-only (/opt/ddtree-sandbox: the venv's base .pth points there);
the venv's python is the image's own /usr/bin/python3 (Debian 12's 3.11, as on the machine).
So ``systemctl``, ``journalctl``, ``NRestarts`` and the journal's cursors the agent reads are
systemd 252's own. The container's id is kept in ``container.json`` in the host dir, so a
crashed run's containers are removed by id.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from ddtree_sandbox.docker_daemon import Daemon
from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.sshd import SshdSpec, generate_keypair, render_sshd_config

UNIT = "sglang.service"
SSHD_UNIT = "sandbox-sshd.service"
SERVE_FILE_NAME = "sglang.env"
RESTART_S = 0.5  # RestartSec= of the sandbox unit: a restart loop shows within seconds
BOOT_TIMEOUT_S = 60.0
SSHD_TIMEOUT_S = 30.0
RECORD = "container.json"
OPT = "/opt/ddtree-sandbox"
# What systemd as PID 1 needs in a container here (docs/notes: --privileged fails on this
# kernel; SYS_ADMIN plus the cgroup mount is enough for systemd 252).
SYSTEMD_FLAGS = (
    "--cap-add", "SYS_ADMIN",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run", "--tmpfs", "/run/lock",
    "--stop-signal", "SIGRTMIN+3",
)  # fmt: skip


def serve_file(host: SandboxHost) -> str:
    """The serve file (EnvironmentFile=) as the host sees it."""
    return f"{host.service_dir}/{SERVE_FILE_NAME}"


def unit_serve_args(host: SandboxHost, port: int) -> list[str]:
    """The stub's own launch flags (inventory ``serve.args``): its address and port."""
    return ["--host", host.address, "--port", str(port)]


def unit_text(host: SandboxHost, service: str, stub_script: str) -> str:
    """The unit file an operator would write for the server on this host."""
    if service == "sglang":
        exec_start = f"{host.python} -m sglang.launch_server $SGLANG_ARGS"
    else:
        exec_start = f"{host.python} {host.service_dir}/{stub_script} serve $SGLANG_ARGS"
    return "\n".join([
        f"# sglang ({service}) on sandbox host {host.name}, run by the container's systemd",
        "[Unit]",
        f"Description=sglang ({service}) on sandbox host {host.name}",
        "",
        "[Service]",
        "Type=simple",
        f"EnvironmentFile={serve_file(host)}",
        "Environment=PYTHONUNBUFFERED=1",
        f"ExecStart={exec_start}",
        f"WorkingDirectory={host.service_dir}",
        "Restart=always",
        f"RestartSec={int(RESTART_S * 1000)}ms",
        "TimeoutStopSec=20",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])  # fmt: skip


def sshd_unit_text(spec: SshdSpec) -> str:
    return "\n".join([
        "[Unit]",
        "Description=the sandbox host's sshd",
        "",
        "[Service]",
        f"ExecStart=/usr/sbin/sshd -D -f {spec.config_file} -E {spec.log_file}",
        "RuntimeDirectory=sshd",
        "RuntimeDirectoryMode=0755",
        "",
    ])  # fmt: skip


def write_stub_serve_file(host: SandboxHost, port: int) -> None:
    """The stub's serve file a pristine host starts from (an EnvironmentFile)."""
    flags = " ".join(unit_serve_args(host, port))
    (host.service_dir_on_disk / SERVE_FILE_NAME).write_text(
        f"# the stub's launch flags on sandbox host {host.name} (an EnvironmentFile)\n"
        f'SGLANG_ARGS="{flags}"\n'
    )


def start_container(
    daemon: Daemon, image: str, host: SandboxHost, spec: SshdSpec, service: str, stub_script: str
) -> str:
    """Run the host's container, boot systemd, install both units, start sshd (and wait
    for its port); return the container id. Raises RuntimeError with what went wrong."""
    units = host.hostdir / "etc" / "units"
    units.mkdir(parents=True, exist_ok=True)
    generate_keypair(spec.host_key, f"sandbox-host@{spec.address}")
    spec.config_file.write_text(render_sshd_config(spec))
    (units / SSHD_UNIT).write_text(sshd_unit_text(spec))
    (units / UNIT).write_text(unit_text(host, service, stub_script))
    workdir = spec.authorized_keys.parent
    binds = [
        (str(workdir), str(workdir), "rw"),
        (str(host.hostdir / "srv"), "/srv", "rw"),
        (str(host.hostdir / "state"), "/var/lib/ddtree-deploy", "rw"),
        (str(host.hostdir / "home"), "/root", "rw"),
        (OPT, OPT, "ro"),
    ]
    volumes = [f"-v={source}:{target}:{mode}" for source, target, mode in binds]
    name = f"ddtree-{host.name}-{host.address.replace('.', '-')}"
    daemon.docker("rm", "-f", name)  # a crashed run's container of the same name
    container_id = daemon.run_container(
        "--name", name, "--hostname", host.name, *SYSTEMD_FLAGS, *volumes, image,
        "/lib/systemd/systemd",
    )  # fmt: skip
    (host.hostdir / RECORD).write_text(
        json.dumps({"id": container_id, "docker_host": daemon.host_url}) + "\n"
    )
    _wait_booted(daemon, container_id, host.name)
    install = (
        f"cp {units}/{SSHD_UNIT} {units}/{UNIT} /etc/systemd/system/ && "
        f"systemctl daemon-reload && systemctl start {SSHD_UNIT}"
    )
    done = daemon.docker("exec", container_id, "/bin/sh", "-c", install, timeout_s=60)
    if done.returncode != 0:
        raise RuntimeError(f"{host.name}: installing the units failed: {done.stderr[-2000:]}")
    _wait_port(host.address, spec.port, spec.log_file)
    return container_id


def _wait_booted(daemon: Daemon, container_id: str, name: str) -> None:
    """Wait until the container's systemd says running (or degraded: a unit of the image
    failed, which the sandbox does not need); raise RuntimeError with its state."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        done = daemon.docker("exec", container_id, "systemctl", "is-system-running", timeout_s=20)
        state = done.stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(0.3)
    logs = daemon.docker("logs", "--tail", "40", container_id).stdout
    raise RuntimeError(f"{name}: systemd in {container_id[:12]} not up ({state!r}):\n{logs}")


def _wait_port(address: str, port: int, log_file: Path) -> None:
    import socket

    deadline = time.monotonic() + SSHD_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
    raise RuntimeError(f"sshd in the container on {address}:{port} not up:\n{tail}")


def start_unit(host: SandboxHost) -> None:
    """`systemctl start` the unit in the host's container, as an operator would."""
    done = host.run(["systemctl", "start", UNIT], timeout_s=60)
    if done.returncode != 0:
        raise RuntimeError(f"{host.name}: systemctl start {UNIT} failed: {done.stderr[-2000:]}")


def read_record(hostdir: Path) -> dict[str, str] | None:
    try:
        record: dict[str, str] = json.loads((hostdir / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record


def stop_container(hostdir: Path) -> bool:
    """Remove the host dir's container (by the id it recorded); True when none is left."""
    record = read_record(hostdir)
    if record is None:
        return True
    env = {"DOCKER_HOST": record["docker_host"], "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        done = subprocess.run(
            ["docker", "rm", "-f", record["id"]],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    gone = done.returncode == 0 or "No such container" in done.stderr
    gone = gone or "Cannot connect to the Docker daemon" in done.stderr  # daemon gone: so is it
    if gone:
        (hostdir / RECORD).unlink(missing_ok=True)
    return gone
