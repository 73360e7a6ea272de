"""Configure and launch one sandbox host's sshd, in its own mount namespace when root."""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ddtree_sandbox.processes import is_running, read_pid_file

SSHD = Path("/usr/sbin/sshd")
SSHD_PRIVSEP_DIR = Path("/run/sshd")
# Host-side mount points, in bind order; /root comes last so nothing under it is needed after.
HOST_MOUNTS: tuple[tuple[str, str], ...] = (
    ("srv", "/srv"),
    ("state", "/var/lib/ddtree-deploy"),
    ("home", "/root"),
)


@dataclass(frozen=True)
class SshdSpec:
    """Where one host's sshd listens and keeps its files (controller-side paths)."""

    hostdir: Path
    address: str
    port: int
    authorized_keys: Path
    namespaced: bool
    # Hooks for topology tests (start_sandbox's ``customize``): more sshd_config lines,
    # more bind mounts (controller path -> host path, after HOST_MOUNTS; namespaced only), and
    # a network namespace (``ip netns`` name) to run sshd in.
    extra_config: tuple[str, ...] = ()
    extra_binds: tuple[tuple[str, str], ...] = ()
    netns: str | None = None

    @property
    def config_file(self) -> Path:
        return self.hostdir / "etc" / "sshd_config"

    @property
    def host_key(self) -> Path:
        return self.hostdir / "etc" / "ssh_host_ed25519_key"

    @property
    def host_key_pub(self) -> Path:
        return self.hostdir / "etc" / "ssh_host_ed25519_key.pub"

    @property
    def pid_file(self) -> Path:
        return self.hostdir / "sshd.pid"

    @property
    def log_file(self) -> Path:
        return self.hostdir / "sshd.log"


def generate_keypair(private_key: Path, comment: str) -> Path:
    """Create an unencrypted ed25519 keypair at ``private_key`` unless one exists; return .pub."""
    if not private_key.exists():
        private_key.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(private_key)]
        subprocess.run(cmd, check=True, capture_output=True)
    return private_key.with_name(private_key.name + ".pub")


# sshd_config lines every sandbox sshd shares (the hosts and bench/standin_sshd.py's
# stand-ins): key-only root login, no PAM, no DNS, no motd. Keys live under a temp dir
# with loose modes (StrictModes no): the sandbox is not a security boundary.
KEY_ONLY_LOGIN = (
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "PermitRootLogin prohibit-password",
    "UsePAM no",
    "StrictModes no",
    "UseDNS no",
    "PrintMotd no",
)


def render_sshd_config(spec: SshdSpec) -> str:
    """Return the sshd_config text for ``spec``: key-only auth, own host key, pid file."""
    lines = [
        f"ListenAddress {spec.address}:{spec.port}",
        f"HostKey {spec.host_key}",
        f"PidFile {spec.pid_file}",
        f"AuthorizedKeysFile {spec.authorized_keys}",
        *KEY_ONLY_LOGIN,
        "MaxStartups 200:30:400",
        "MaxSessions 100",
        "Subsystem sftp internal-sftp",
        *spec.extra_config,
    ]
    return "\n".join(lines) + "\n"


def build_launch_command(spec: SshdSpec) -> list[str]:
    """Return argv that runs sshd in the foreground, inside a private mount namespace if asked.

    In namespaced mode the host's ``srv``, ``state`` and ``home`` dirs are bind-mounted over
    ``/srv``, ``/var/lib/ddtree-deploy`` and ``/root`` before ``exec sshd``, so the sshd pid is
    the launcher's pid and every login on this host sees the same paths a real host has.
    """
    sshd = [str(SSHD), "-D", "-f", str(spec.config_file), "-E", str(spec.log_file)]
    netns = ["ip", "netns", "exec", spec.netns] if spec.netns else []
    if not spec.namespaced:
        return [*netns, *sshd]
    mounts = [(str(spec.hostdir / rel), target) for rel, target in HOST_MOUNTS]
    binds = [
        f"mount --bind {shlex.quote(source)} {shlex.quote(target)}"
        for source, target in [*mounts, *spec.extra_binds]
    ]
    script = " && ".join([*binds, "exec " + shlex.join(sshd)])
    unshare = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script]
    return [*netns, *unshare]


def launch_sshd(spec: SshdSpec) -> subprocess.Popen[bytes]:
    """Write the config and start sshd detached (own session); return its Popen handle."""
    spec.config_file.parent.mkdir(parents=True, exist_ok=True)
    generate_keypair(spec.host_key, f"sandbox-host@{spec.address}")
    spec.config_file.write_text(render_sshd_config(spec))
    spec.pid_file.unlink(missing_ok=True)
    if spec.namespaced:
        SSHD_PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        for _rel, target in HOST_MOUNTS:
            Path(target).mkdir(parents=True, exist_ok=True)
    with open(spec.log_file, "ab") as log:
        return subprocess.Popen(
            build_launch_command(spec),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_sshd_ready(spec: SshdSpec, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """Poll until sshd's PidFile appears; return its pid. Raise RuntimeError on exit/timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = read_pid_file(spec.pid_file)
        if pid is not None and is_running(pid):
            return pid
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    log_tail = spec.log_file.read_text(errors="replace")[-2000:] if spec.log_file.exists() else ""
    raise RuntimeError(
        f"sshd for {spec.address}:{spec.port} not ready (exit {proc.poll()}):\n{log_tail}"
    )


def format_known_hosts_line(address: str, port: int, host_public_key: Path) -> str:
    """Return the known_hosts line ``[addr]:port keytype base64`` for a host key file."""
    key_type, key_b64 = host_public_key.read_text().split()[:2]
    return f"[{address}]:{port} {key_type} {key_b64}"
