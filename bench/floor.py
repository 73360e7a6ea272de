"""The floor of scenario A: the least a push with suites [] can cost over OpenSSH.

Per host ONE plain `ssh` (one connect, one exec, the whole job as a shell script on stdin)
does what ddtree-deploy's push does there: take a lock (mkdir), back up the files sglang
already has, write the new files (base64 in the script), check their sha256, py_compile
them, stop/start/status the service, wait for health, append a journal line, drop the lock.
Every host at once. No checks a real deploy needs (drift, an existing lock's owner, a
rollback on failure) and no report: what is left is the transport, the host's own commands
and the wait for them. `bare_ssh` is the transport alone: `ssh host true` on every host.

The script is built by a pure function (`floor_script`, tested in tests/bench); the runners
start one `ssh` per host, wait for all, and raise RuntimeError when any host failed, so a
broken floor never counts as a fast one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness import BACKUP_DIR, BenchHosts
from tools import ToolRun, _ssh_argv, children_cpu_s

FLOOR = "floor: one ssh per host (same work)"
BARE_SSH = "ssh host true (transport alone)"
HEALTH_TRIES = 1200  # × 0.05 s: the same 60 s a push's ready timeout allows at most
FLOOR_EXIT_LOCKED = 7


@dataclass(frozen=True)
class FloorFile:
    """One file of the push: its path under site-packages, result bytes, and whether sglang
    already has it (then it is backed up first)."""

    path: str
    data: bytes
    existed: bool


@dataclass(frozen=True)
class FloorJob:
    """What the floor does on one host (host-side paths and commands)."""

    site: str
    backup_dir: str
    python: str
    service_stop: str
    service_start: str
    service_status: str
    health_url: str
    files: tuple[FloorFile, ...]


def floor_script(job: FloorJob) -> str:
    """Return the POSIX sh script that does a push's work on one host in one exec.

    Exit codes: 0 done; FLOOR_EXIT_LOCKED another run holds the lock; 1 a sha256 mismatch
    (sha256sum -c); 9 the service never answered health; others: the failing command's.
    """
    q = shlex.quote
    backup, lock = q(job.backup_dir), q(f"{job.backup_dir}/lock")
    lines = [
        "set -eu",
        f"mkdir -p -m 700 {backup}",
        f"mkdir {lock} 2>/dev/null || exit {FLOOR_EXIT_LOCKED}",
    ]
    for item in job.files:
        if item.existed:
            flat = item.path.replace("/", "__")
            lines.append(f"cp -p {q(f'{job.site}/{item.path}')} {q(f'{job.backup_dir}/{flat}')}")
    sums = []
    for item in job.files:
        target = f"{job.site}/{item.path}"
        encoded = base64.b64encode(item.data).decode()
        wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
        lines += [
            f"mkdir -p {q(os.path.dirname(target))}",
            f"base64 -d > {q(target + '.floor-new')} <<'FLOOR_B64'",
            wrapped,
            "FLOOR_B64",
            f"mv -f {q(target + '.floor-new')} {q(target)}",
        ]
        sums.append(f"{hashlib.sha256(item.data).hexdigest()}  {target}")
    lines += ["sha256sum -c --quiet - <<'FLOOR_SUMS'", *sums, "FLOOR_SUMS"]
    paths = " ".join(q(f"{job.site}/{item.path}") for item in job.files)
    lines += [
        f"{job.python} -m py_compile {paths}",
        f"{job.service_stop} >/dev/null",
        f"{job.service_start} >/dev/null",
        f"{job.service_status} >/dev/null",
        "tries=0",
        f"until curl -fsS -o /dev/null {q(job.health_url)}; do",
        f"  tries=$((tries + 1)); [ $tries -lt {HEALTH_TRIES} ] || exit 9; sleep 0.05",
        "done",
        f"printf '%s\\n' {q(journal_line(job))} >> {q(job.backup_dir + '/journal.jsonl')}",
        f"rmdir {lock}",
    ]
    return "\n".join(lines) + "\n"


def journal_line(job: FloorJob) -> str:
    """The journal line the floor appends: the files it installed and their sha256."""
    entries = ",".join(
        f'{{"path":"{f.path}","sha256":"{hashlib.sha256(f.data).hexdigest()}"}}' for f in job.files
    )
    return f'{{"event":"floor-install","files":[{entries}]}}'


def floor_jobs(bench: BenchHosts, count: int) -> list[FloorJob]:
    """The floor's job for each of the first ``count`` hosts."""
    pristine = bench.sandbox.base_env.sglang_dir
    files = tuple(
        FloorFile(rel, data, (pristine / rel).exists()) for rel, data in bench.results.items()
    )
    return [
        FloorJob(
            site=bench.site_packages,
            backup_dir=BACKUP_DIR,
            python=bench.python,
            service_stop=bench.service_argv("stop"),
            service_start=bench.service_argv("start"),
            service_status=bench.service_argv("status"),
            health_url=bench.health_url(host),
            files=files,
        )
        for host in bench.hosts[:count]
    ]


def _run_everywhere(bench: BenchHosts, commands: list[tuple[str, Path | None]]) -> ToolRun:
    """One `ssh` per (command, stdin file) pair, host i gets pair i, all at once; wall from
    the first start to the last exit, CPU of every ssh client. Raises RuntimeError naming
    the first host that failed."""
    load_1m = os.getloadavg()[0]
    cpu_before = children_cpu_s()
    started = time.monotonic()
    procs = []
    for index, (command, stdin_path) in enumerate(commands):
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL  # noqa: SIM115
        procs.append(
            subprocess.Popen(
                _ssh_argv(bench, index, command),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
        if stdin_path:
            stdin.close()  # type: ignore[union-attr]  # the child holds its own copy
    outputs = [proc.communicate() for proc in procs]
    wall_s = time.monotonic() - started
    cpu_s = children_cpu_s() - cpu_before
    for index, (proc, (_, err)) in enumerate(zip(procs, outputs, strict=True)):
        if proc.returncode != 0:
            raise RuntimeError(
                f"{bench.hosts[index].name}: floor exited {proc.returncode}: "
                f"{err.decode(errors='replace')[-2000:]}"
            )
    return ToolRun(wall_s, 0, cpu_s, load_1m)


def run_floor(bench: BenchHosts, count: int) -> ToolRun:
    """The floor on the first ``count`` hosts: one `ssh HOST sh -s` each, script on stdin."""
    commands: list[tuple[str, Path | None]] = []
    for index, job in enumerate(floor_jobs(bench, count)):
        script = bench.workdir / f"floor-{index}.sh"
        script.write_text(floor_script(job))
        commands.append(("sh -s", script))
    return _run_everywhere(bench, commands)


def run_bare_ssh(bench: BenchHosts, count: int) -> ToolRun:
    """`ssh HOST true` on the first ``count`` hosts at once: connect, auth, one exec."""
    return _run_everywhere(bench, [("true", None)] * count)
