"""The REAL sglang service of sandbox hosts: its serve file, readiness, and stopping it.

Each host's service is ``sglang_service.py`` (copied into the host's service dir), which runs
``python -m sglang.launch_server`` with the flags of the serve file ``sglang.env``. This module
writes the serve file a pristine host starts from (as an operator would), gives the host's own
flags for the inventory (a patchset's [serve] adds the algorithm), waits for health, and stops
a server left behind (its whole process tree) by pid file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import urllib.request
from pathlib import Path

from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.models import ModelSet
from ddtree_sandbox.processes import find_children, is_running, read_cmdline, read_pid_file
from ddtree_sandbox.serving import base_launch_args, dflash_args, serve_env

SERVICE_PORT = 30000
REAL_SOURCE = Path(__file__).with_name("sglang_service.py")
REAL_MARKER = "sglang.launch_server"
SERVE_FILE_NAME = "sglang.env"
# What a pristine real host serves before any push: the target with DFLASH, or plain greedy.
INITIAL_ALGORITHMS = ("DFLASH", None)
DFLASH_BLOCK_SIZE = 4


def host_serve_args(models: ModelSet, host: SandboxHost, sglang_version: str) -> list[str]:
    """The host's own server flags (inventory `serve.args`): its model, address, port, the
    CPU settings and the DFlash draft; a patchset's [serve] adds the algorithm."""
    model_dir = models.path(host.model)
    return [
        *base_launch_args(model_dir, host.address, SERVICE_PORT, tp_size=host.tp_size),
        *dflash_args(models.draft, DFLASH_BLOCK_SIZE, sglang_version)[2:],  # all but the algorithm
    ]


def host_serve_env(models: ModelSet, host: SandboxHost) -> dict[str, str]:
    """The host's server environment (inventory `serve.env`, the pristine serve file's)."""
    return serve_env(models.path(host.model), host.tp_size)


def pristine_serve_file(
    models: ModelSet, host: SandboxHost, algorithm: str | None, sglang_version: str
) -> str:
    """The serve file an operator would have written before any push (DFLASH or plain)."""
    model_dir = models.path(host.model)
    args = base_launch_args(model_dir, host.address, SERVICE_PORT, tp_size=host.tp_size)
    if algorithm == "DFLASH":
        args += dflash_args(models.draft, DFLASH_BLOCK_SIZE, sglang_version)
    lines = [
        f"# sglang on sandbox host {host.name}: {host.model} model, "
        f"{algorithm or 'no speculative decoding'} (written by the sandbox, as an operator would)",
        f'SGLANG_ARGS="{" ".join(args)}"',
        *(f'{key}="{value}"' for key, value in sorted(host_serve_env(models, host).items())),
    ]
    return "\n".join(lines) + "\n"


def wait_healthy(host: SandboxHost, timeout_s: float) -> None:
    """Poll the host's /health_generate until HTTP 200; raise RuntimeError with the log tail."""
    url = f"http://{host.address}:{SERVICE_PORT}/health_generate"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                if response.status == 200:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    log = host.service_dir_on_disk / "server.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{host.name}: {url} not healthy after {timeout_s:.0f}s; log:\n{tail}")


def stop_real_server(pid_file: Path) -> bool:
    """Stop a real sglang server and its scheduler/detokenizer processes (its process group)."""
    pid = read_pid_file(pid_file)
    if pid is None or REAL_MARKER not in read_cmdline(pid):
        return True
    members = [pid, *find_children(pid)]
    for signum, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 3.0)):
        for member in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signum)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(is_running(m) for m in members):
            time.sleep(0.05)
    stopped = not any(is_running(m) for m in members)
    if stopped:
        pid_file.unlink(missing_ok=True)
    return stopped
