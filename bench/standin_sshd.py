"""Controller-only scaling rig: a real OpenSSH sshd whose every session is the recorded-answer
stand-in (bench/standin_agent.py), many inventory hosts on it, and CPU pinning.

TIMING RUNS ONLY (scenario B-ctl): the controller does all of a push's own work (SSH
handshake and auth per host, host keys strictly checked, the agent bundle sent, one request
per stage, every answer parsed and acted on, events), while the host side costs one sshd
session and one small python per host, on the host cores (`taskset`), never the
controller's. No host state changes: nothing here tells whether a push is correct.

Pure parts (tested in tests/bench): `split_cpus`, `group_ports`,
`render_standin_config`, `standin_inventory`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import BENCH_DIR

from ddtree_sandbox.inventory_file import render_toml
from ddtree_sandbox.sshd import KEY_ONLY_LOGIN

SSHD = "/usr/sbin/sshd"
STANDIN = BENCH_DIR / "standin_agent.py"
MAX_STARTUPS = 1024  # every host an sshd serves may be mid-handshake at once
PORTS_PER_SSHD = 16  # sshd's limit on listening sockets


def split_cpus(cpus: set[int]) -> tuple[set[int], set[int]] | None:
    """(controller cores, host cores): the lowest core for the controller, the rest for the
    hosts; None when there is only one core (nothing to keep apart)."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        return None
    return {ordered[0]}, set(ordered[1:])


def cpu_list(cpus: set[int]) -> str:
    """`taskset -c` form: "1,2,3"."""
    return ",".join(str(c) for c in sorted(cpus))


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` onto `cpus` (children it starts later inherit it)."""
    subprocess.run(
        ["taskset", "-a", "-p", "-c", cpu_list(cpus), str(pid)], check=True, capture_output=True
    )


@dataclass(frozen=True)
class StandinFiles:
    """Where the stand-in sshds keep their files (under one dir)."""

    root: Path

    @property
    def host_key(self) -> Path:
        return self.root / "ssh_host_ed25519_key"

    @property
    def authorized_keys(self) -> Path:
        return self.root / "authorized_keys"

    @property
    def frames(self) -> Path:
        return self.root / "frames.json"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    def config(self, index: int) -> Path:
        return self.root / f"sshd_config.{index}"

    def log(self, index: int) -> Path:
        return self.root / f"sshd.{index}.log"


def group_ports(ports: list[int]) -> list[list[int]]:
    """The ports in groups of at most PORTS_PER_SSHD: one sshd serves each group (an
    inventory host is an address and port, and sshd listens on at most 16 sockets)."""
    return [ports[i : i + PORTS_PER_SSHD] for i in range(0, len(ports), PORTS_PER_SSHD)]


def render_standin_config(files: StandinFiles, ports: list[int], force_command: str) -> str:
    """sshd_config for one stand-in sshd: key-only root login on 127.0.0.1 at each of
    `ports`, every session forced to `force_command` with HOME at the rig's dir (no login
    rc file of root's runs), room for MAX_STARTUPS handshakes."""
    return (
        "\n".join(
            [
                *(f"ListenAddress 127.0.0.1:{port}" for port in ports),
                f"HostKey {files.host_key}",
                "PidFile none",
                f"AuthorizedKeysFile {files.authorized_keys}",
                *KEY_ONLY_LOGIN,
                "LogLevel ERROR",
                f"MaxStartups {MAX_STARTUPS}",
                f"ForceCommand {force_command}",
                # The login shell runs ForceCommand, and bash started by sshd reads
                # $HOME/.bashrc: root's on this machine runs `pyenv init`, whose rehash
                # takes a lock and polls it every 0.1 s, so 64 sessions at once queued on it
                # (2.3 hosts/s at 1,000 hosts). The stand-in needs nothing from a home.
                f"SetEnv HOME={files.root}",
            ]
        )
        + "\n"
    )


def standin_inventory(one_host_toml: str, ports: list[int], known_hosts: str) -> str:
    """One host per port (standin-0001, …) at 127.0.0.1, every other setting as the one host
    of `one_host_toml` (a bench inventory): what the recording was made with."""
    data = tomllib.loads(one_host_toml)
    (template,) = data["hosts"].values()
    data["defaults"]["known_hosts"] = known_hosts
    data["hosts"] = {
        f"standin-{i:04d}": {**template, "address": "127.0.0.1", "port": port}
        for i, port in enumerate(ports, start=1)
    }
    return render_toml(data)


def free_ports(count: int, held_at_once: int = 128) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now, picked by the kernel; at most
    `held_at_once` sockets are open at a time (the open-files limit)."""
    found: dict[int, None] = {}  # ordered and distinct
    while len(found) < count:
        held = []
        try:
            for _ in range(min(held_at_once, count - len(found))):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", 0))
            found.update((int(sock.getsockname()[1]), None) for sock in held)
        finally:
            for sock in held:
                sock.close()
    return list(found)


@dataclass
class Standin:
    """Running stand-in sshds (pinned to host cores), their ports and files."""

    files: StandinFiles
    ports: list[int]
    processes: list[subprocess.Popen]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def start_standin(
    root: Path, identity_pub: Path, frames_json: str, host_cpus: set[int] | None, count: int
) -> Standin:
    """Start stand-in sshds for `count` hosts (on `host_cpus` when given), answering from
    `frames_json`; returns once every port accepts. Raises RuntimeError when one does not."""
    files = StandinFiles(root)
    root.mkdir(parents=True, exist_ok=True)
    if not files.host_key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(files.host_key)],
            check=True, capture_output=True,
        )  # fmt: skip
    shutil.copyfile(identity_pub, files.authorized_keys)
    files.frames.write_text(frames_json)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    command = f"{python} -S -E {STANDIN} {files.frames}"
    ports = free_ports(count)
    key_type, key = Path(f"{files.host_key}.pub").read_text().split()[:2]
    files.known_hosts.write_text("".join(f"[127.0.0.1]:{p} {key_type} {key}\n" for p in ports))
    standin = Standin(files, ports, [])
    try:
        for index, group in enumerate(group_ports(ports)):
            files.config(index).write_text(render_standin_config(files, group, command))
            argv = [SSHD, "-D", "-f", str(files.config(index)), "-E", str(files.log(index))]
            if host_cpus:
                argv = ["taskset", "-c", cpu_list(host_cpus), *argv]
            standin.processes.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
        for index, group in enumerate(group_ports(ports)):
            _wait_listening(group, standin.processes[index], files.log(index))
    except BaseException:
        standin.stop()
        raise
    return standin


def _wait_listening(ports: list[int], process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    text = log.read_text() if log.exists() else ""
                    raise RuntimeError(f"stand-in sshd not up on {port}: {text[-2000:]}") from None
                time.sleep(0.05)


def all_cpus() -> set[int]:
    """The cores this process may use."""
    return set(os.sched_getaffinity(0))
