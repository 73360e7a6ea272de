"""A PRIVATE Docker daemon for the sandbox, and the Debian image its containers run.

The machine has no systemd to start Docker and no registry to pull from, so the harness
starts its own ``dockerd`` (own data root, exec root, pid file and unix socket under one
dir; ``--bridge=none --iptables=false --ip-masq=false``: no docker0, no private-range
address, every container on the host's network, listening on 127.0.0.x only) and builds its
image from a Debian bookworm root filesystem made by ``debootstrap --variant=minbase``,
imported with ``docker import``. The rootfs tarball is cached under /opt/ddtree-sandbox,
keyed by its recipe (suite, variant, packages), so only the first run pays for debootstrap
(about 3 minutes on 2 cores); every daemon imports the tarball once (seconds).

``Daemon.stop`` removes every container this daemon ran (by id) and ends the daemon (by the
pid it wrote), never anything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_sandbox.processes import is_running, read_cmdline, read_pid_file

DOCKERD = "dockerd"
DOCKER = "docker"
DEBOOTSTRAP = "debootstrap"
CACHE_ROOT = Path("/opt/ddtree-sandbox/images")
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# systemd as PID 1, its journal and dbus, sshd for the controller, sudo for `become`,
# python3 for a container whose python differs from the host's venv; procps (ps) for
# people looking inside.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "sudo",
    "python3",
    "procps",
)
IMAGE_REPO = "ddtree-sandbox/bookworm-systemd"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def recipe_key(packages: Sequence[str] = PACKAGES) -> str:
    """The cache key of the image: its suite, variant and packages (12 hex digits)."""
    recipe = f"{SUITE} minbase {MIRROR} {' '.join(sorted(packages))}"
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def image_tag(packages: Sequence[str] = PACKAGES) -> str:
    return f"{IMAGE_REPO}:{recipe_key(packages)}"


def missing_tools() -> list[str]:
    """The programs the harness needs that are not installed (docker.io, debootstrap)."""
    return [tool for tool in (DOCKERD, DOCKER, DEBOOTSTRAP) if shutil.which(tool) is None]


@contextlib.contextmanager
def _cache_lock(cache_dir: Path) -> Iterator[None]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run building the same recipe: wait for it
        yield


def ensure_rootfs_tarball(packages: Sequence[str] = PACKAGES) -> Path:
    """Return the cached rootfs tarball for the recipe, running debootstrap first if needed.

    Built under a flock into a temp dir beside the cache and renamed into place, so a crash
    never leaves a half tarball under the final name. Raises RuntimeError naming the
    missing tool or debootstrap's last lines."""
    cache_dir = CACHE_ROOT / recipe_key(packages)
    tarball = cache_dir / "rootfs.tar"
    if tarball.exists():
        return tarball
    missing = missing_tools()
    if DEBOOTSTRAP in missing:
        raise RuntimeError("debootstrap is missing (make install / .ci/run install it)")
    with _cache_lock(cache_dir):
        if tarball.exists():
            return tarball
        work = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
        try:
            rootfs = work / "rootfs"
            argv = [
                DEBOOTSTRAP, "--variant=minbase", f"--include={','.join(packages)}",
                SUITE, str(rootfs), MIRROR,
            ]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-3000:]
                raise RuntimeError(f"debootstrap failed ({done.returncode}):\n{tail}")
            _trim_rootfs(rootfs)
            partial = work / "rootfs.tar"
            subprocess.run(
                ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
                check=True,
                capture_output=True,
            )
            partial.rename(tarball)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tarball


def _trim_rootfs(rootfs: Path) -> None:
    """Make the rootfs a container's: no apt caches, no host keys baked in (each sandbox
    host's sshd has its own), getty units masked (no consoles in a container)."""
    shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    for key in (rootfs / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    wants = rootfs / "etc" / "systemd" / "system"
    for unit in ("getty@tty1.service", "serial-getty@.service", "ssh.service"):
        link = wants / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    for sub in ("getty.target.wants", "multi-user.target.wants"):
        for link in (wants / sub).glob("*getty*"):
            link.unlink()
    (rootfs / "etc" / "machine-id").write_text("")


@dataclass
class Daemon:
    """One private dockerd: its dir (data/exec roots, socket, pid file, log)."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None
    started: list[str] = field(default_factory=list)  # container ids this harness ran

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def host_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid_file(self) -> Path:
        return self.root / "dockerd.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "dockerd.log"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host_url}

    def docker(
        self, *args: str, timeout_s: float = 120.0, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI against this daemon; never raises on a non-zero exit."""
        return subprocess.run(
            [DOCKER, *args],
            input=stdin.decode() if stdin is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=self.env(),
        )

    def check(self, *args: str, timeout_s: float = 120.0) -> str:
        """Run docker; return its stdout stripped; raise RuntimeError naming the command."""
        done = self.docker(*args, timeout_s=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()[-2000:]}")
        return done.stdout.strip()

    def run_container(self, *args: str) -> str:
        """``docker run -d --network host ARGS``; return the new container's id (recorded,
        so ``stop`` removes it)."""
        container_id = self.check("run", "-d", "--network", "host", *args)
        self.started.append(container_id)
        return container_id

    def ensure_image(self, packages: Sequence[str] = PACKAGES) -> str:
        """Import the cached rootfs as this daemon's image (once); return its tag."""
        tag = image_tag(packages)
        if self.docker("image", "inspect", tag).returncode == 0:
            return tag
        tarball = ensure_rootfs_tarball(packages)
        done = subprocess.run(
            [DOCKER, "import", "-c", 'CMD ["/lib/systemd/systemd"]', str(tarball), tag],
            capture_output=True,
            text=True,
            timeout=600,
            env=self.env(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"docker import {tarball}: {done.stderr.strip()[-2000:]}")
        return tag

    def stop(self) -> bool:
        """Remove every container this harness ran (by id), then end dockerd (by its pid
        file, its command line checked); return True when the daemon is gone."""
        for container_id in reversed(self.started):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.docker("rm", "-f", container_id, timeout_s=60)
        self.started.clear()
        pid = read_pid_file(self.pid_file)
        if pid is not None and str(self.root) in read_cmdline(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while is_running(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        gone = pid is None or not is_running(pid)
        if gone:  # dockerd leaves its overlay mounts to the next start; unmount them now
            _unmount_under(self.root)
        return gone


def start_daemon(root: Path) -> Daemon:
    """Start a private dockerd with everything under ``root``; wait until it answers.

    Raises RuntimeError (never a skip) when docker.io is missing or the daemon does not come
    up, with its log's tail."""
    missing = [tool for tool in missing_tools() if tool != DEBOOTSTRAP]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: install docker.io (make install)")
    root.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(root)
    if len(str(daemon.socket)) > 100:
        raise RuntimeError(f"{daemon.socket}: too long for a unix socket path")
    argv = [
        DOCKERD,
        "--bridge=none", "--iptables=false", "--ip-masq=false",
        "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
        "--pidfile", str(daemon.pid_file), "-H", daemon.host_url,
        "--storage-driver", "overlay2", "--log-driver", "json-file",
    ]  # fmt: skip
    with open(daemon.log_file, "ab") as log:
        daemon.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if daemon.proc.poll() is not None:
            break
        if daemon.socket.exists() and daemon.docker("info", timeout_s=10).returncode == 0:
            return daemon
        time.sleep(0.3)
    daemon.stop()
    tail = daemon.log_file.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"dockerd under {root} did not come up:\n{tail}")


def _unmount_under(root: Path) -> None:
    """Lazily unmount whatever is still mounted under ``root`` (deepest first)."""
    prefix = str(root.resolve()) + "/"
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for mount_point in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount_point], capture_output=True, check=False)


def stop_recorded_daemon(record: Path) -> bool:
    """Stop the private dockerd named by ``record`` (``{"root": DIR}``, written when a
    sandbox started it) and delete its dir; True when none is left. Works after a crash:
    the pid file and its command line are all it needs."""
    try:
        root = Path(json.loads(record.read_text())["root"])
    except (OSError, ValueError, KeyError):
        return True
    if not Daemon(root).stop():
        return False
    shutil.rmtree(root, ignore_errors=True)
    record.unlink(missing_ok=True)
    return True
