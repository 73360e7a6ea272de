"""Sandbox hosts whose service is ``kind = "systemd"``: the systemd TEST STAND-IN on them.

Such a host gets ``srv/systemd/`` (host view ``/srv/systemd``): ``systemd_standin.py``,
``bin/systemctl`` and ``bin/journalctl`` (tiny scripts running it with the host's python),
and the unit ``units/sglang.service``, whose ExecStart runs the stub server with
``$SGLANG_ARGS`` from ``EnvironmentFile=`` (the host's serve file) and ``Restart=on-failure``.
The host's sshd puts ``bin/`` first on the PATH of every session (sshd_config ``SetEnv``),
so the agent's plain ``systemctl``/``journalctl`` calls reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

from ddtree_sandbox import systemd_standin
from ddtree_sandbox.host import SandboxHost

UNIT = "sglang.service"
STANDIN_DIR = "systemd"  # under the host's srv/
SERVE_FILE_NAME = "sglang.env"
RESTART_S = 0.5  # RestartSec= of the sandbox unit: a restart loop shows within seconds
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STOP_WAIT_S = 15.0


def standin_dir(host: SandboxHost) -> str:
    """The stand-in's dir as the host sees it."""
    return str(Path(host.service_dir).parent / STANDIN_DIR)


def serve_file(host: SandboxHost) -> str:
    """The serve file (EnvironmentFile=) as the host sees it."""
    return f"{host.service_dir}/{SERVE_FILE_NAME}"


def unit_serve_args(host: SandboxHost, port: int) -> list[str]:
    """The host's own launch flags (inventory ``serve.args``): the stub's address and port."""
    return ["--host", host.address, "--port", str(port)]


def unit_text(host: SandboxHost, script: str) -> str:
    """The unit file an operator would write for the stub server on this host."""
    return "\n".join([
        f"# sglang (the sandbox's stub server) on sandbox host {host.name}; read by the",
        "# sandbox's systemd TEST STAND-IN (systemd_standin.py), not by systemd",
        "[Unit]",
        f"Description=sglang stub on sandbox host {host.name}",
        "",
        "[Service]",
        "Type=simple",
        f"EnvironmentFile={serve_file(host)}",
        f"ExecStart={host.python} {host.service_dir}/{script} serve $SGLANG_ARGS",
        f"WorkingDirectory={host.service_dir}",
        "Restart=on-failure",
        f"RestartSec={int(RESTART_S * 1000)}ms",
        "TimeoutStopSec=10",
        "",
    ])  # fmt: skip


def install_standin(host: SandboxHost, script: str, port: int) -> tuple[str, ...]:
    """Write the stand-in, its bin/ scripts, the unit and a pristine serve file into the
    host's dir; return the sshd_config lines that put bin/ first on the PATH."""
    on_disk = host.hostdir / "srv" / STANDIN_DIR
    (on_disk / "bin").mkdir(parents=True, exist_ok=True)
    (on_disk / "units").mkdir(exist_ok=True)
    source = Path(systemd_standin.__file__)
    for name in (source.name, *systemd_standin.SIBLINGS):
        (on_disk / name).write_text(source.with_name(name).read_text())
    for tool in ("systemctl", "journalctl"):
        wrapper = on_disk / "bin" / tool
        wrapper.write_text(
            "#!/bin/sh\n# TEST STAND-IN for systemd's " + tool + " (ddtree sandbox), not systemd\n"
            f'exec {host.python} {standin_dir(host)}/{source.name} {tool} "$@"\n'
        )
        wrapper.chmod(0o755)
    (on_disk / "units" / UNIT).write_text(unit_text(host, script))
    flags = " ".join(unit_serve_args(host, port))
    (host.service_dir_on_disk / SERVE_FILE_NAME).write_text(
        f"# the stub's launch flags on sandbox host {host.name} (an EnvironmentFile)\n"
        f'SGLANG_ARGS="{flags}"\n'
    )
    return (f"SetEnv PATH={standin_dir(host)}/bin:{BASE_PATH}",)


def start_unit(host: SandboxHost) -> None:
    """`systemctl start` the unit on the host (over its namespace, as an operator would)."""
    done = host.run(f"{standin_dir(host)}/bin/systemctl start {UNIT}", timeout_s=60)
    if done.returncode != 0:
        raise RuntimeError(f"{host.name}: systemctl start {UNIT} failed: {done.stderr[-2000:]}")


def stop_units(hostdir: Path) -> bool:
    """End every stand-in supervisor of the host dir (SIGTERM: it ends its unit's process
    group); return True when none is left. Checks each pid's command line first."""
    run_dir = hostdir / "srv" / STANDIN_DIR / "run"
    stopped = True
    for state_file in sorted(run_dir.glob("*.json")) if run_dir.is_dir() else []:
        try:
            pid = int(json.loads(state_file.read_text()).get("supervisor") or 0)
        except (OSError, ValueError):
            continue
        if pid <= 0 or not _is_supervisor(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while _is_supervisor(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        stopped &= not _is_supervisor(pid)
    return stopped


def _is_supervisor(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    alive = stat[stat.rfind(")") + 2 :].split()[0] != "Z"
    return alive and systemd_standin.MARKER.encode() in cmdline and b"supervise" in cmdline
