"""What the real-server tests share: the 2-host sandbox (conftest.py's `serving`) and
helpers that read the hosts and the CLI's JSON Lines."""

from __future__ import annotations

import json
import tomllib
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_sandbox.hosts import SERVE_FILE_NAME, SERVICE_PORT
from ddtree_sandbox.inventory_file import render_toml
from tests.serving.ddtree_probes import WORKER_MODULES
from tests.support import REPO, run_cli

DDTREE_110 = REPO / "patchsets" / "ddtree" / "1.1.0"


@dataclass
class Serving:
    """The shared 2-host sandbox: host0 serves the fp32 target, host1 the control target;
    `patchsets` holds ddtree 1.1.0, its broken variants and the gate fixtures."""

    sandbox: Any
    patchsets: Path
    workdir: Path
    pristine_serve: dict[str, bytes]
    pristine_tree: dict[str, dict[str, str]]
    runs: int = 0

    @classmethod
    def record(cls, sandbox: Any, patchsets: Path, workdir: Path) -> Serving:
        """The sandbox with each host's serve file and tree as they are now: the pristine
        state `restore` and `assert_pristine` hold the hosts to."""
        state = cls(sandbox, patchsets, workdir, pristine_serve={}, pristine_tree={})
        for host in sandbox.hosts:
            state.pristine_serve[host.name] = state.serve_file(host.name)
            state.pristine_tree[host.name] = host.tree_digest()
        return state

    def host(self, name: str) -> Any:
        return self.sandbox.host(name)

    def inventory(
        self, budget: int | None = None, gate: dict[str, Any] | None = None, **smoke: object
    ) -> Path:
        """The sandbox inventory; with `budget`, every host's DDTree budget overridden; with
        `gate`, those keys in [defaults.gate]; with `smoke` keys, those set for every host."""
        if budget is None and gate is None and not smoke:
            return self.sandbox.inventory_path
        data = tomllib.loads(self.sandbox.inventory_path.read_text())
        for table in data["hosts"].values():
            if budget is not None:
                table["serve"]["args"] += ["--speculative-ddtree-budget", str(budget)]
            table["smoke"].update(smoke)
        if gate is not None:  # over the sandbox's own [defaults.gate], key by key
            defaults = data.setdefault("defaults", {})
            defaults["gate"] = {**defaults.get("gate", {}), **gate}
        self.runs += 1
        path = self.workdir / f"inventory-{self.runs:02d}.toml"
        path.write_text(render_toml(data))
        return path

    def cli(
        self,
        *args: str,
        budget: int | None = None,
        gate: dict[str, Any] | None = None,
        **smoke: object,
    ) -> Any:
        """Run the CLI against the sandbox; its output is kept in workdir for a failed test."""
        extra = ["-i", str(self.inventory(budget, gate, **smoke))]
        if args[0] in ("push", "plan", "smoke", "status", "gate"):
            extra += ["--patchsets-dir", str(self.patchsets)]
        done = run_cli(*args, *extra, timeout=900)
        self.runs += 1
        log = self.workdir / f"cli-{self.runs:02d}-{args[0]}.log"
        log.write_text(f"$ {' '.join(args)}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def cli_together(self, *commands: tuple[tuple[str, ...], dict[str, Any]]) -> list[Any]:
        """Run several CLI commands at once (each on its own host): [(args, kwargs), ...]."""
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            futures = [pool.submit(self.cli, *args, **kw) for args, kw in commands]
            return [f.result() for f in futures]

    def serve_file(self, name: str) -> bytes:
        return (self.host(name).service_dir_on_disk / SERVE_FILE_NAME).read_bytes()

    def assert_pristine(self, name: str) -> None:
        """The host is back as the sandbox started it: files, serve flags, DFLASH served."""
        host = self.host(name)
        assert self.serve_file(name) == self.pristine_serve[name]
        assert host.tree_digest() == self.pristine_tree[name]
        assert get_json(host, "/server_info")["speculative_algorithm"] == "DFLASH"

    def is_pristine(self, name: str) -> bool:
        """assert_pristine as a yes/no (a server that does not answer is not pristine)."""
        try:
            self.assert_pristine(name)
        except (AssertionError, OSError):
            return False
        return True

    def restore(self) -> list[str]:
        """Roll back every host a failed test left on new code (up to 3 deploys deep), so
        the tests after it start from the baseline they assume: one failure stays one
        failure. Returns the hosts it had to roll back."""
        restored = []
        for host in self.sandbox.hosts:
            for _ in range(3):
                if self.is_pristine(host.name):
                    break
                restored.append(host.name)
                self.cli("rollback", "-H", host.name, "--break-lock")
        return restored


class PlainServing(Serving):
    """Serving whose pristine hosts serve their target plain (no speculative algorithm), so a
    push's lossless gate records its references from the host's own plain server."""

    def assert_pristine(self, name: str) -> None:
        host = self.host(name)
        assert self.serve_file(name) == self.pristine_serve[name]
        assert host.tree_digest() == self.pristine_tree[name]
        assert get_json(host, "/server_info")["speculative_algorithm"] is None


def get_json(host, path: str) -> dict:
    with urllib.request.urlopen(f"http://{host.address}:{SERVICE_PORT}{path}", timeout=30) as r:
        return json.loads(r.read())


def listener_cmdline(address: str, port: int) -> str:
    """The command line of the process listening on address:port (from /proc/net/tcp)."""
    octets = address.split(".")
    local = "".join(f"{int(o):02X}" for o in reversed(octets)) + f":{port:04X}"
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[3] == "0A":  # 0A: LISTEN
            inode = fields[9]
    assert inode, f"nothing listens on {address}:{port}"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = [fd.readlink() for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        if Path(f"socket:[{inode}]") in fds:
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    raise AssertionError(f"no process holds the socket of {address}:{port}")


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def server_suites(stdout: str, stage: str = "verify", suite: str = "server") -> dict[str, dict]:
    """host -> the result of `suite` the push reported at `stage`."""
    found = {}
    for e in events(stdout):
        data = e.get("data") or {}
        if e["stage"] == stage and e["event"] == "info" and data.get("suite") == suite:
            found[e["host"]] = data
    return found


def checks(suite: dict) -> dict[str, dict]:
    return {c["name"]: c for c in suite["checks"]}


def summary(stdout: str) -> dict[str, dict]:
    return {e["host"]: e for e in events(stdout) if e["stage"] == "summary"}


def accept_length(check: dict) -> float:
    """The accept length an `acceptance` check ran at (its detail's first line says it)."""
    first = check["detail"].splitlines()[0]
    return float(first.split("accept length ")[1].split()[0])


def assert_serves_ddtree(serving: Serving, stdout: str, budget: int, imports: bool = True) -> None:
    """What a good ddtree 1.1.x push to both hosts leaves: the lossless server suite passed on
    each (8/8 one at a time), each runs `launch_server` with DDTREE at `budget`, the control
    target (host1) accepts 3 drafts + bonus a step; with `imports`, the push's `imports`
    suite imported every patched worker module in a fresh process."""
    suites = server_suites(stdout)
    assert set(suites) == {"host0", "host1"}, stdout[-3000:]
    for name, suite in suites.items():
        found = checks(suite)
        assert suite["passed"], suite
        for check in ("reference", "lossless_sequential", "lossless_concurrent", "acceptance"):
            assert found[check]["passed"], (name, check, found[check])
        assert "8/8" in found["lossless_sequential"]["detail"], found["lossless_sequential"]
        host = serving.host(name)
        info = get_json(host, "/server_info")
        assert info["speculative_algorithm"] == "DDTREE"
        assert info["speculative_ddtree_budget"] == budget
        cmdline = listener_cmdline(host.address, SERVICE_PORT)
        assert "-m sglang.launch_server" in cmdline
        assert "--speculative-algorithm DDTREE" in cmdline
        assert f"--speculative-ddtree-budget {budget}" in cmdline
        assert b"DDTREE" in serving.serve_file(name)
    assert accept_length(checks(suites["host1"])["acceptance"]) >= 3.0
    if imports:
        suite = server_suites(stdout, "smoke", "imports")["host0"]
        assert WORKER_MODULES <= set(checks(suite)), sorted(checks(suite))
        assert all(c["passed"] for c in suite["checks"]), suite["details"]
