"""One timed run of each tool against the bench hosts: ddtree-deploy, Ansible, Fabric, and the
compute floor of the import smoke (the same imports over plain ssh).

Every runner starts the tool as a fresh process (as a user would), returns a ``ToolRun``, and
raises RuntimeError when the tool failed, so a broken run is never counted as a fast one.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_push import PROFILE_ENV
from harness import BACKUP_DIR, BENCH_DIR, REPO, BenchHosts

PLAYBOOK = BENCH_DIR / "ansible" / "deploy.yml"
WARM_CONTROL_DIR = Path(f"/tmp/acp-warm-{os.getpid()}")


@dataclass
class ToolRun:
    wall_s: float
    exit_code: int = 0
    cpu_s: float = 0.0  # user+sys CPU of the tool's process tree (RUSAGE_CHILDREN delta)
    load_1m: float = 0.0  # 1-minute load average when the run started
    stats: dict[str, dict] = field(default_factory=dict)  # ddtree-deploy: host -> counters
    events: list[dict] = field(default_factory=list)  # ddtree-deploy --json events
    phases_s: dict[str, float] = field(default_factory=dict)  # ddtree-deploy: where time went


def children_cpu_s() -> float:
    """User+system CPU seconds of every child process this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Timed:
    """One finished tool process: wall and CPU seconds, the load when it started."""

    wall_s: float
    cpu_s: float
    load_1m: float
    done: subprocess.CompletedProcess


def _timed(argv: list[str], env: dict | None = None, cwd: Path = REPO) -> Timed:
    """Run argv to completion; its CPU is the RUSAGE_CHILDREN delta around it (the bench
    runs one tool at a time, and waits for nothing else in between)."""
    load_1m = os.getloadavg()[0]
    cpu_before = children_cpu_s()
    started = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd
    )
    wall_s = time.monotonic() - started
    return Timed(wall_s, children_cpu_s() - cpu_before, load_1m, done)


@functools.cache
def compile_ddtree_bytecode() -> None:
    """Write the bytecode of ddtree_deploy's modules (once per bench process), as
    `pip install` does: a machine with PYTHONDONTWRITEBYTECODE set (this one) would
    otherwise compile ~100 modules from source on every run, ~0.15 s of start-up that no
    installed copy pays. Ansible, Fabric and every other package here have theirs."""
    argv = [sys.executable, "-m", "compileall", "-q", str(REPO / "ddtree_deploy")]
    subprocess.run(argv, check=True, capture_output=True)


def run_ddtree(
    bench: BenchHosts,
    inventory: Path,
    patchsets_dir: Path,
    expect_exit: int = 0,
    profile: Path | None = None,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> ToolRun:
    """`ddtree-deploy push --all --yes --json [extra]` through the stats hook; one fresh
    process (with ``profile``: every controller thread under cProfile, stats written there;
    ``env``: more environment, e.g. ddtree_push.RECORD_ENV)."""
    compile_ddtree_bytecode()
    stats_path = bench.workdir / "ddtree-stats.json"
    argv = [
        sys.executable, str(BENCH_DIR / "ddtree_push.py"), str(stats_path),
        "push", "-i", str(inventory), "--all", "--yes", "--json",
        "-p", "ddtree@1.0.0", "--patchsets-dir", str(patchsets_dir), *(extra or []),
    ]  # fmt: skip
    launched = time.time()
    timed = _timed(argv, env={**({PROFILE_ENV: str(profile)} if profile else {}), **(env or {})})
    wall_s, done = timed.wall_s, timed.done
    stats = json.loads(stats_path.read_text())
    if stats["exit_code"] != expect_exit:
        raise RuntimeError(
            f"ddtree-deploy exited {stats['exit_code']} (wanted {expect_exit}):\n"
            f"{done.stderr[-3000:]}"
        )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    run = ToolRun(wall_s, stats["exit_code"], timed.cpu_s, timed.load_1m, stats["hosts"], events)
    if events:
        first, last = event_time_s(events[0]), event_time_s(events[-1])
        run.phases_s = {
            "start-up (launch to first event)": first - launched,
            "hosts (first to last event)": last - first,
            "wind-down (last event to exit)": launched + wall_s - last,
        }
    return run


def write_ansible_config(bench: BenchHosts, control_dir: Path, forks: int = 16) -> Path:
    """ansible.cfg with the best settings we know for this job (see docs/benchmarks.md)."""
    ssh_args = " ".join(
        [
            "-o ControlMaster=auto",
            "-o ControlPersist=60s",
            f"-o UserKnownHostsFile={bench.known_hosts}",
            "-o StrictHostKeyChecking=yes",
            "-o IdentitiesOnly=yes",
            "-o PreferredAuthentications=publickey",
            "-o GSSAPIAuthentication=no",
            "-o Compression=no",
        ]
    )
    text = f"""[defaults]
forks = {forks}
host_key_checking = True
gathering = explicit
interpreter_python = {bench.python}
retry_files_enabled = False
local_tmp = {bench.workdir / "ansible-tmp"}
nocows = 1

[ssh_connection]
pipelining = True
ssh_args = {ssh_args}
control_path_dir = {control_dir}
control_path = %(directory)s/%%p
"""
    path = bench.workdir / "ansible.cfg"
    path.write_text(text)
    return path


def ansible_playbook() -> str:
    """The `ansible-playbook` installed beside this python, else the one on PATH. Found
    through PATH on a pyenv machine it is a shim (a shell script that re-resolves the
    version on every run): start-up Ansible itself does not cost."""
    return shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or (
        "ansible-playbook"
    )


def run_ansible(bench: BenchHosts, count: int, warm: bool = False) -> ToolRun:
    """`ansible-playbook bench/ansible/deploy.yml` on the first ``count`` hosts.

    Cold (default): a fresh ControlPath dir and every master closed afterwards, so each run
    pays one SSH connect per host like ddtree-deploy. Warm: masters from the previous run
    stay up (ControlPersist) and are reused.
    """
    # ControlPath must fit a unix socket name (108 bytes): keep it short, under /tmp
    control_dir = WARM_CONTROL_DIR if warm else Path(tempfile.mkdtemp(prefix="acp-"))
    control_dir.mkdir(parents=True, exist_ok=True)
    config = write_ansible_config(bench, control_dir)
    manifest = bench.write_results()
    extra = {
        "files_manifest": str(manifest),
        "site": bench.site_packages,
        "backup_dir": BACKUP_DIR,
        "python": bench.python,
        "service_stop": bench.service_argv("stop"),
        "service_start": bench.service_argv("start"),
    }
    argv = [
        ansible_playbook(), "-i", str(bench.write_ansible_inventory(count)),
        "-e", json.dumps(extra), str(PLAYBOOK),
    ]  # fmt: skip
    timed = _timed(argv, env={"ANSIBLE_CONFIG": str(config)})
    done = timed.done
    if not warm:
        close_masters(control_dir)
        shutil.rmtree(control_dir, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"ansible-playbook exited {done.returncode}:\n{done.stdout[-3000:]}")
    return ToolRun(timed.wall_s, done.returncode, timed.cpu_s, timed.load_1m)


def close_masters(control_dir: Path) -> None:
    """Ask every OpenSSH ControlMaster under control_dir to exit."""
    for sock in control_dir.iterdir() if control_dir.is_dir() else []:
        subprocess.run(
            ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "bench"],
            capture_output=True,
            timeout=10,
        )


def run_fabric(bench: BenchHosts, count: int) -> ToolRun:
    """bench/fabric_deploy.py (naive Fabric) on the first ``count`` hosts."""
    files = json.loads(bench.write_results().read_text())
    plan = {
        "hosts": [
            {"name": h.name, "port": p.port, "health_url": bench.health_url(h)}
            for h, p in list(zip(bench.hosts, bench.proxies, strict=True))[:count]
        ],
        "known_hosts": str(bench.known_hosts),
        "identity_file": str(bench.sandbox.identity_file),
        "files": files,
        "site": bench.site_packages,
        "backup_dir": BACKUP_DIR,
        "python": bench.python,
        "service_stop": bench.service_argv("stop"),
        "service_start": bench.service_argv("start"),
    }
    plan_path = bench.workdir / "fabric-plan.json"
    plan_path.write_text(json.dumps(plan))
    timed = _timed([sys.executable, str(BENCH_DIR / "fabric_deploy.py"), str(plan_path)])
    done = timed.done
    if done.returncode != 0:
        raise RuntimeError(f"fabric_deploy.py exited {done.returncode}:\n{done.stderr[-3000:]}")
    return ToolRun(timed.wall_s, done.returncode, timed.cpu_s, timed.load_1m)


def _ssh_argv(bench: BenchHosts, index: int, command: str) -> list[str]:
    """Plain OpenSSH to host ``index`` through its proxy: one connect, one exec."""
    return [
        "ssh", "-i", str(bench.sandbox.identity_file),
        "-o", f"UserKnownHostsFile={bench.known_hosts}", "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlMaster=no",
        "-p", str(bench.proxies[index].port), "root@127.0.0.1", command,
    ]  # fmt: skip


def run_ssh(bench: BenchHosts, index: int, command: str) -> ToolRun:
    """`command` on host ``index`` over plain ssh; raises RuntimeError unless it exits 0."""
    timed = _timed(_ssh_argv(bench, index, command))
    if timed.done.returncode != 0:
        raise RuntimeError(f"ssh {command!r} exited {timed.done.returncode}: "
                           f"{timed.done.stderr[-2000:]}")  # fmt: skip
    return ToolRun(timed.wall_s, 0, timed.cpu_s, timed.load_1m)


def run_smoke_floor(bench: BenchHosts, count: int, suite_input: dict, script: str) -> ToolRun:
    """The `imports` suite alone: on each host at once, one plain `ssh` (connect + one exec)
    runs the suite ``script`` (planted by scenario_gates.plant_suite) with the same input."""
    procs = []
    load_1m = os.getloadavg()[0]
    started = time.monotonic()
    for index in range(count):
        argv = _ssh_argv(bench, index, f"{bench.python} {script}")
        procs.append(
            subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
    outputs = [p.communicate(json.dumps(suite_input).encode()) for p in procs]
    wall_s = time.monotonic() - started
    for proc, (out, err) in zip(procs, outputs, strict=True):
        lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines or not json.loads(lines[-1]).get("passed"):
            raise RuntimeError(f"smoke floor failed ({proc.returncode}): {err.decode()[-2000:]}")
    return ToolRun(wall_s, 0, load_1m=load_1m)


def event_time_s(event: dict) -> float:
    """An event's controller timestamp as epoch seconds."""
    return datetime.datetime.fromisoformat(event["ts"]).timestamp()
