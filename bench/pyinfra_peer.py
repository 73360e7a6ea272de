"""pyinfra, the peer of scenario A: one cold `pyinfra` run of bench/pyinfra-deploy/deploy.py.

pyinfra lives in its own venv (PYINFRA_VENV, made by `make bench` from
bench/requirements-pyinfra.txt): its 3.10 release needs paramiko<5 and the tool's
environment has paramiko 5. Each run is a fresh process with no connection kept from the
last (pyinfra has no ControlPersist): cold, like ddtree-deploy's. Hosts are reached through
the same proxies and known_hosts as every other tool, host keys strictly checked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness import BACKUP_DIR, BENCH_DIR, BenchHosts
from tools import ToolRun, _timed

PYINFRA = "pyinfra (cold)"
PYINFRA_VENV = Path(os.environ.get("BENCH_PYINFRA_VENV", BENCH_DIR / ".pyinfra-venv")).resolve()
DEPLOY = BENCH_DIR / "pyinfra-deploy" / "deploy.py"  # not importable: no clash with pyinfra


def pyinfra_bin() -> Path | None:
    """The `pyinfra` of PYINFRA_VENV, or None when that venv was not made."""
    path = PYINFRA_VENV / "bin" / "pyinfra"
    return path if path.exists() else None


def render_inventory(hosts: list[dict], identity_file: str, known_hosts: str) -> str:
    """pyinfra's Python inventory: group `bench`, one (name, data) per host; `hosts` items
    hold name, port and health_url."""
    common = {
        "ssh_hostname": "127.0.0.1",
        "ssh_user": "root",
        "ssh_key": identity_file,
        "ssh_known_hosts_file": known_hosts,
        "ssh_strict_host_key_checking": "yes",
    }
    entries = [
        (h["name"], {**common, "ssh_port": h["port"], "health_url": h["health_url"]}) for h in hosts
    ]
    return f"bench = {entries!r}\n"


def run_pyinfra(bench: BenchHosts, count: int) -> ToolRun:
    """`pyinfra INVENTORY deploy.py -y --no-wait` on the first ``count`` hosts (every host
    runs its operations without waiting for the others: pyinfra's fastest mode).

    Raises RuntimeError when pyinfra is not installed or any host failed."""
    binary = pyinfra_bin()
    if binary is None:
        raise RuntimeError(f"pyinfra is not installed in {PYINFRA_VENV} (make bench makes it)")
    hosts = [
        {"name": h.name, "port": p.port, "health_url": bench.health_url(h)}
        for h, p in list(zip(bench.hosts, bench.proxies, strict=True))[:count]
    ]
    inventory = bench.workdir / f"pyinfra-inventory-{count}.py"
    inventory.write_text(
        render_inventory(hosts, str(bench.sandbox.identity_file), str(bench.known_hosts))
    )
    plan = {
        "files": json.loads(bench.write_results().read_text()),
        "site": bench.site_packages,
        "backup_dir": BACKUP_DIR,
        "python": bench.python,
        "service_stop": bench.service_argv("stop"),
        "service_start": bench.service_argv("start"),
    }
    plan_path = bench.workdir / "pyinfra-plan.json"
    plan_path.write_text(json.dumps(plan))
    argv = [str(binary), str(inventory), str(DEPLOY), "-y", "--no-wait", "--parallel", str(count)]
    timed = _timed(argv, env={"BENCH_PYINFRA_PLAN": str(plan_path)}, cwd=bench.workdir)
    done = timed.done
    if done.returncode != 0:
        raise RuntimeError(
            f"pyinfra exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return ToolRun(timed.wall_s, 0, timed.cpu_s, timed.load_1m)
