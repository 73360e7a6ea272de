"""Host-side fault tools for sandbox hosts: pause the real agent at an op, cut its SSH
session, fill or freeze a directory, make the service fail its next start; and read back
what the host looks like from inside its own mount namespace.

A host whose service is a real systemd unit (systemd_host.py) lives in a container of the
sandbox's dockerd: its processes are found through the container's pid namespace (its
PID 1 as the machine sees it), its service is `sglang.service`, and `chattr` runs on the
bind-mounted directories from outside (a container has no CAP_LINUX_IMMUTABLE).

The pause works through a stand-in for the host's python (`/srv/service/holdpy`): it runs
the real bootstrap importer on the bundle it is sent, then wraps one op in
`ddtree_agent.main.OPS` so that the first call of it waits for the test. Everything the
agent does (SIGHUP, locks, writes) is the real thing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ddtree_deploy.agent.protocol import BOOTSTRAP_IMPORTER
from ddtree_sandbox.processes import find_children, read_cmdline

HOST_PYTHON = "/srv/venv/bin/python"
SITE = "/srv/venv/lib/python3.11/site-packages"
SPECULATIVE = f"{SITE}/sglang/srt/speculative"
STATE_DIR = "/var/lib/ddtree-deploy"
SERVICE = "/srv/service"
HOLD_PYTHON = f"{SERVICE}/holdpy"  # the host's python as the hold stand-in (see below)
UNIT = "sglang.service"  # a systemd host's server (systemd_host.py)
READY_LINE = "ready to roll"

HOLDPY = f"""#!{HOST_PYTHON}
import json, os, sys, time
HOLD, PAUSED, GO = "{SERVICE}/hold.json", "{SERVICE}/hold.paused", "{SERVICE}/hold.go"
if sys.argv[1:2] != ["-c"]:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
exec({BOOTSTRAP_IMPORTER!r})  # the real first stage: the bundle, importable as ddtree_agent
import ddtree_agent.main as agent
try:
    with open(HOLD) as fh:
        hold = json.load(fh)
except (OSError, ValueError):
    hold = None
if hold:
    real = agent.OPS[hold["op"]]
    calls = []

    def held(ctx, args):
        state = (getattr(args, "entry", None) or {{}}).get("state")
        if hold.get("state") in (None, state):
            calls.append(state)  # the matching calls: the hold is at the nth of them
        nth = len(calls) == hold.get("nth", 1)
        if hold.get("state") in (None, state) and nth and os.path.exists(HOLD):
            os.unlink(HOLD)
            with open(PAUSED, "w") as fh:
                fh.write(str(os.getpid()))
            deadline = time.monotonic() + 180
            while not os.path.exists(GO) and time.monotonic() < deadline:
                time.sleep(0.05)
        return real(ctx, args)

    agent.OPS[hold["op"]] = held
agent.main()
"""

FAULTY_START = f"""import json, subprocess, sys, time
from pathlib import Path
d = Path("{SERVICE}")
plan, cfg = d / "start_plan.json", d / "stub.json"
stub = [sys.executable, str(d / "sglang_stub.py")]
steps = json.loads(plan.read_text()) if plan.exists() else []
action = steps.pop(0) if steps else "ok"
plan.write_text(json.dumps(steps))
if action == "fail":
    print("injected fault: the service refuses to start", file=sys.stderr)
    sys.exit(1)
if action != "never_ready":
    sys.exit(subprocess.call(stub + ["start"]))
original = cfg.read_text()
cfg.write_text(json.dumps(dict(json.loads(original), never_ready=True)))
log = d / "server.log"
mark = log.stat().st_size if log.exists() else 0
try:
    code = subprocess.call(stub + ["start"])
    deadline = time.monotonic() + 20
    while "config" not in log.read_text()[mark:] and time.monotonic() < deadline:
        time.sleep(0.05)
finally:
    cfg.write_text(original)
sys.exit(code)
"""


class FaultHost:
    """One sandbox host prepared for fault injection (see the module docstring)."""

    def __init__(self, sandbox, ready_timeout_s: float = 20.0, index: int = 0, rewire=True):
        """Host `index` of `sandbox`; `rewire`: point the inventory's python and service
        start at the hold and faulty-start stand-ins (a one-host sandbox; a fleet's test
        sets its one member's `python` to HOLD_PYTHON itself)."""
        self.sandbox = sandbox
        self.host = sandbox.hosts[index]
        self._immutable: list[str] = []
        self._filled: list[str] = []
        service = self.host.service_dir_on_disk
        (service / "holdpy").write_text(HOLDPY)
        (service / "holdpy").chmod(0o755)
        (service / "faulty_start.py").write_text(FAULTY_START)
        if not rewire:
            return
        inv = sandbox.inventory_path
        text = inv.read_text()
        text = text.replace(f'python = "{HOST_PYTHON}"', f'python = "{SERVICE}/holdpy"', 1)
        text = text.replace(
            f'start = "{HOST_PYTHON} {SERVICE}/sglang_stub.py start"',
            f'start = "{HOST_PYTHON} {SERVICE}/faulty_start.py"',
        )
        text = text.replace(
            "ready_timeout_s = 60", f"ready_timeout_s = {ready_timeout_s}\npoll_interval_s = 0.2"
        )
        inv.write_text(text)

    # --- what the host looks like ------------------------------------------------------

    def digest(self) -> dict[str, str]:
        """sha256 of every file under site-packages/sglang, read inside the host namespace
        (so tmpfs mounts the faults put there are seen)."""
        code = (
            "import hashlib,json,os,sys\nout={}\ntop=sys.argv[1]\n"
            "for d,ds,fs in os.walk(top):\n ds[:]=[x for x in ds if x!='__pycache__']\n"
            " for f in fs:\n  p=os.path.join(d,f)\n"
            "  out[os.path.relpath(p,top)]=hashlib.sha256(open(p,'rb').read()).hexdigest()\n"
            "print(json.dumps(out))"
        )
        done = self.host.run([HOST_PYTHON, "-c", code, f"{SITE}/sglang"])
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def journal(self) -> list[dict]:
        done = self.host.run(["cat", f"{STATE_DIR}/journal.jsonl"])
        return [json.loads(x) for x in done.stdout.splitlines() if x.strip()]

    def lock(self) -> dict | None:
        done = self.host.run(["cat", f"{STATE_DIR}/lock"])
        return json.loads(done.stdout) if done.returncode == 0 else None

    @property
    def is_unit_host(self) -> bool:
        """True for a host in a container with real systemd (its server is sglang.service)."""
        return self.host.container is not None

    def service_running(self) -> bool:
        if self.is_unit_host:
            return self.host.run(["systemctl", "is-active", "--quiet", UNIT]).returncode == 0
        return self.host.run([HOST_PYTHON, f"{SERVICE}/sglang_stub.py", "status"]).returncode == 0

    def _unit_ready_lines(self) -> int:
        done = self.host.run(["journalctl", "-u", UNIT, "-o", "cat", "--no-pager"])
        return done.stdout.count(READY_LINE)

    def start_service(self, timeout_s: float = 90.0) -> None:
        """Start the stub and wait until it has imported sglang and says it is ready (so
        its import cannot overlap the install under test). A systemd host: restart the unit
        and wait for the ready line in its journal."""
        if self.is_unit_host:
            ready = self._unit_ready_lines()
            done = self.host.run(["systemctl", "restart", UNIT])
            assert done.returncode == 0, done.stdout + done.stderr
            deadline = time.monotonic() + timeout_s
            while self._unit_ready_lines() <= ready:
                assert time.monotonic() < deadline, "sglang.service never said it was ready"
                time.sleep(0.2)
            return
        log = self.host.service_dir_on_disk / "server.log"
        ready = log.read_text().count("ready to roll") if log.exists() else 0
        done = self.host.run([HOST_PYTHON, f"{SERVICE}/sglang_stub.py", "start"])
        assert done.returncode == 0, done.stdout + done.stderr
        deadline = time.monotonic() + timeout_s
        while log.read_text().count("ready to roll") <= ready:
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)

    # --- pausing the agent ---------------------------------------------------------------

    def hold_at(self, op: str, state: str | None = None, nth: int = 1) -> None:
        """The next agent call of `op` (journal: with this entry state; the nth call of it
        in one agent, e.g. the second service's restart) waits for release()."""
        service = self.host.service_dir_on_disk
        for name in ("hold.paused", "hold.go"):
            (service / name).unlink(missing_ok=True)
        hold = {"op": op, "state": state, "nth": nth}
        (service / "hold.json").write_text(json.dumps(hold))

    def wait_paused(self, proc, timeout_s: float = 90.0) -> int:
        """Block until an agent sits at the held op; returns its pid."""
        marker = self.host.service_dir_on_disk / "hold.paused"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text())
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"CLI exited {proc.returncode} before the hold: {_err(proc)}")
            time.sleep(0.05)
        raise AssertionError("the agent never reached the held op")

    def release(self) -> None:
        (self.host.service_dir_on_disk / "hold.go").write_text("go")

    def agents(self) -> list[int]:
        """Pids of agent processes running in this host's namespace (orphans included)."""
        ns = _mount_ns(self._anchor_pid())
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and "ddtree-agent" in read_cmdline(int(entry.name)):
                if _mount_ns(int(entry.name)) == ns:
                    found.append(int(entry.name))
        return found

    def _anchor_pid(self) -> int | None:
        """A pid, as this machine sees it, in the host's namespaces: its sshd, or for a
        systemd host its container's PID 1 (the sshd pid file holds the container's view)."""
        if not self.is_unit_host:
            return self.host.sshd_pid()
        env = {**os.environ, "DOCKER_HOST": self.host.docker_host or ""}
        done = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", self.host.container],
            capture_output=True, text=True, env=env, timeout=30,
        )  # fmt: skip
        return int(done.stdout.strip()) if done.returncode == 0 else None

    def _session_pids(self) -> list[int]:
        """Per-connection sshd processes of the host ("sshd: root@notty", "[priv]")."""
        if not self.is_unit_host:
            return session_pids(self.host.sshd_pid())
        ns = _pid_ns(self._anchor_pid())
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or _pid_ns(int(entry.name)) != ns:
                continue
            cmdline = read_cmdline(int(entry.name))
            if cmdline.startswith("sshd:") and "[listener]" not in cmdline:
                found.append(int(entry.name))
        return found

    def _on_disk(self, path: str) -> str:
        """Where a host path lies on this machine (a systemd host's bind mounts)."""
        if not self.is_unit_host:
            return path
        for inside, outside in ((STATE_DIR, self.host.hostdir / "state"),
                                ("/srv", self.host.hostdir / "srv")):  # fmt: skip
            if path == inside or path.startswith(inside + "/"):
                return str(outside) + path[len(inside) :]
        raise ValueError(f"{path}: not on a bind mount of the systemd host")

    def wait_agents_gone(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.agents() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not self.agents(), "an agent is still running on the host"

    # --- faults --------------------------------------------------------------------------

    def cut_ssh(self) -> int:
        """SIGKILL every per-connection sshd process of the host (the listener stays);
        returns how many were killed."""
        return kill_all(self._session_pids())

    def tmpfs_over(self, path: str, size: str = "16m") -> None:
        """Mount a tmpfs holding a copy of `path` over it (inside the host namespace)."""
        tmp = f"/tmp/ddtree-fault-{os.getpid()}-{time.monotonic_ns()}"
        script = (
            f"set -e; cp -a {path} {tmp}; mount -t tmpfs -o size={size},mode=0700 tmpfs {path}; "
            f"cp -a {tmp}/. {path}/; rm -rf {tmp}"
        )
        done = self.host.run(script)
        assert done.returncode == 0, done.stderr

    def fill(self, path: str) -> None:
        """Fill the filesystem holding `path` until it reports ENOSPC."""
        self.host.run(f"dd if=/dev/zero of={path}/.filler bs=64k 2>/dev/null; sync")
        self._filled.append(path)

    def make_immutable(self, path: str) -> None:
        """chattr +i: even root gets EPERM creating, renaming or removing entries in it."""
        if self.is_unit_host:
            done = subprocess.run(["chattr", "+i", self._on_disk(path)], capture_output=True,
                                  text=True)  # fmt: skip
        else:
            done = self.host.run(["chattr", "+i", path])
        assert done.returncode == 0, done.stderr
        self._immutable.append(path)

    def clear_faults(self) -> None:
        """Undo fill() and make_immutable() (the operator fixing the host)."""
        for path in self._immutable:
            if self.is_unit_host:
                subprocess.run(["chattr", "-i", self._on_disk(path)], check=False)
            else:
                self.host.run(["chattr", "-i", path])
        for path in self._filled:
            self.host.run(["rm", "-f", f"{path}/.filler"])
        self._immutable, self._filled = [], []

    def plan_starts(self, *actions: str) -> None:
        """Outcome of the next service starts, in order: "ok", "fail" or "never_ready"."""
        (self.host.service_dir_on_disk / "start_plan.json").write_text(json.dumps(list(actions)))

    def tamper(self, rel: str) -> None:
        """Append a line to an installed file (someone else writing during the deploy)."""
        self.host.run(f"echo '# tampered' >> {SITE}/{rel}")


def _mount_ns(pid: int | None) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def session_pids(sshd_pid: int | None) -> list[int]:
    """The per-connection processes ("sshd: root@notty", "[priv]") of an sshd listener."""
    return [pid for pid in find_children(sshd_pid) if read_cmdline(pid).startswith("sshd:")]


def kill_all(pids: list[int]) -> int:
    """SIGKILL each pid; returns how many were still there to kill."""
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed


def _pid_ns(pid: int | None) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _err(proc) -> str:
    try:
        return proc.stderr.read()[-2000:]
    except (OSError, ValueError):
        return ""
