"""The smoke suites and `smoke` command on a real sshd host patched with the real ddtree 1.0.0.

One host is pushed once for the module (the push runs every suite, `server` after the
restart); each gap test then alters one thing on the host, runs only the suite that must
catch it, and restores the host before the next test.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_deploy.events import EVENT_SCHEMA_VERSION
from ddtree_sandbox import SandboxHost, start_sandbox
from tests.support import run_cli

pytestmark = pytest.mark.hosts

PATCHSET = "ddtree@1.0.0"
ALL_SUITES = ["integrity", "compile", "imports", "ddtree", "gpu", "server"]
SPECULATIVE = "sglang/srt/speculative"
DEPENDENT = f"{SPECULATIVE}/ngram_info.py"  # imports spec_info; nothing imports it back
STUB = "/srv/venv/bin/python /srv/service/sglang_stub.py"


class Patched:
    """The module's host after one push, and the smoke command run against it."""

    def __init__(self, workdir: Path, base_env) -> None:
        self.sandbox = start_sandbox(
            workdir / "sandbox", 1, first_octet=None, base_env=base_env, service="stub"
        )
        self.host: SandboxHost = self.sandbox.hosts[0]
        self.workdir = workdir
        self.inventory = str(self.sandbox.inventory_path)
        self.push = run_cli("push", "-H", "host0", "-i", self.inventory, "-p", PATCHSET, "--json")
        self.push_events = parse_events(self.push.stdout)

    def smoke(
        self, *suites: str, extra: tuple[str, ...] = ()
    ) -> tuple[int, list[dict], ET.Element, str]:
        """`smoke --json --junit` on host0: exit code, events, JUnit root, stderr (table)."""
        junit = self.workdir / "smoke.xml"
        junit.unlink(missing_ok=True)
        args = ["smoke", "-H", "host0", "-i", self.inventory, "-p", PATCHSET, "--json", *extra]
        for suite in suites:
            args += ["--suite", suite]
        done = run_cli(*args, "--junit", str(junit))
        return done.returncode, parse_events(done.stdout), ET.parse(junit).getroot(), done.stderr

    def site_file(self, rel: str) -> Path:
        return self.host.site_packages_on_disk / rel

    def restart_stub(self, **config: object) -> None:
        """Rewrite stub.json, restart the stub via its command, wait for health."""
        self.host.write_stub_config(**config)
        done = self.host.run(f"{STUB} stop && {STUB} start")
        assert done.returncode == 0, done.stdout + done.stderr
        url = self.host.read_stub_config()
        health = f"http://{url['host']}:{url['port']}/health_generate"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(health, timeout=2) as resp:
                    if resp.status == 200:
                        return
            time.sleep(0.2)
        raise AssertionError(f"stub not healthy at {health} after restart")


def parse_events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def suite_events(events: list[dict]) -> dict[str, dict]:
    """suite name -> its result line, from the `smoke` info events."""
    return {
        e["data"]["suite"]: e["data"]
        for e in events
        if e["stage"] == "smoke" and e["event"] == "info" and e["data"]
    }


def junit_cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in root.iter("testcase")}


def failed_detail(result: dict) -> str:
    return "\n".join(c["detail"] for c in result["checks"] if not c["passed"])


@contextlib.contextmanager
def altered(path: Path, text: str) -> Iterator[None]:
    """Replace a host file's content for the block; restore the original bytes after."""
    original = path.read_bytes()
    path.write_text(text)
    try:
        yield
    finally:
        path.write_bytes(original)


def insert_after_future_imports(source: str, line: str) -> str:
    lines = source.splitlines(keepends=True)
    last = max((i for i, ln in enumerate(lines) if ln.startswith("from __future__")), default=-1)
    return "".join([*lines[: last + 1], line + "\n", *lines[last + 1 :]])


@pytest.fixture(scope="module")
def patched(base_env, tmp_path_factory) -> Iterator[Patched]:
    host = Patched(tmp_path_factory.mktemp("smoke-hosts"), base_env)
    yield host
    host.sandbox.stop()


def test_push_verifies_and_every_suite_passes_on_the_patched_host(patched):
    assert patched.push.returncode == 0, patched.push.stderr[-3000:]
    # the pre-restart suites are reported in the order the patchset names them
    pushed = [e["data"]["suite"] for e in patched.push_events
              if e["stage"] == "smoke" and e["event"] == "info" and e["data"]]  # fmt: skip
    assert pushed == ALL_SUITES[:-1]
    verify = [e for e in patched.push_events if e["stage"] == "verify"]
    assert [e["event"] for e in verify if e["event"] != "info"] == ["start", "ok"]
    server = [e["data"] for e in verify if e["event"] == "info"]  # the push reports its suite
    assert [s["suite"] for s in server] == ["server"] and server[0]["passed"]

    code, events, junit, table = patched.smoke()

    assert code == 0, table[-3000:]
    assert events and all(e["schema_version"] == EVENT_SCHEMA_VERSION for e in events)
    results = suite_events(events)
    assert list(results) == ALL_SUITES
    assert all(results[s]["passed"] for s in ALL_SUITES if s != "gpu"), results
    mode = {c["name"]: c["detail"] for c in results["imports"]["checks"]}["mode"]
    assert mode.startswith("fork: ") and "forked from one warm parent" in mode, mode
    assert results["gpu"]["skipped"] and not results["gpu"]["passed"]
    assert {c["name"] for c in results["server"]["checks"]} == {
        "health",
        "server_info",
        "generate",
        "acceptance",
    }
    cases = junit_cases(junit)
    assert {f"smoke.{s}" for s in ALL_SUITES} | {"preflight", "smoke"} == set(cases)
    assert (junit.get("tests"), junit.get("failures"), junit.get("skipped")) == ("8", "0", "1")
    assert cases["smoke.gpu"].find("skipped") is not None
    assert "server" in table and "passed" in table and "skipped" in table


def test_integrity_catches_a_file_altered_after_push(patched):
    target = patched.site_file(f"{SPECULATIVE}/ddtree_utils.py")
    with altered(target, target.read_text() + "# edited by hand\n"):
        code, events, junit, table = patched.smoke("integrity")
    assert code == 1
    result = suite_events(events)["integrity"]
    detail = failed_detail(result)
    assert "/srv/venv/lib/python3.11/site-packages/" + f"{SPECULATIVE}/ddtree_utils.py" in detail
    assert "!= lock" in detail
    assert (junit.get("tests"), junit.get("failures"), junit.get("skipped")) == ("3", "2", "0")
    failure = junit_cases(junit)["smoke.integrity"].find("failure")
    assert failure is not None and "ddtree_utils.py" in failure.text
    assert "FAILED" in table
    assert patched.smoke("integrity")[0] == 0  # restored


def test_compile_catches_a_syntax_error_in_a_patched_module(patched):
    target = patched.site_file(f"{SPECULATIVE}/spec_info.py")
    with altered(target, target.read_text() + "\ndef broken(:\n    pass\n"):
        code, events, _, _ = patched.smoke("compile")
    assert code == 1
    result = suite_events(events)["compile"]
    failed = [c for c in result["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == [f"{SPECULATIVE}/spec_info.py"]
    assert "site-packages/sglang/srt/speculative/spec_info.py" in failed[0]["detail"]
    assert "syntax" in failed[0]["detail"].lower()


def test_imports_catches_a_dependent_importing_a_missing_name(patched):
    """Also in isolated mode (--isolated-imports): each module in a fresh interpreter."""
    target = patched.site_file(DEPENDENT)
    bad = "from sglang.srt.speculative.spec_info import NoSuchName  # noqa"
    with altered(target, insert_after_future_imports(target.read_text(), bad)):
        code, events, _, _ = patched.smoke("imports", extra=("--isolated-imports",))
    assert code == 1
    result = suite_events(events)["imports"]
    mode = {c["name"]: c["detail"] for c in result["checks"]}["mode"]
    assert mode.startswith("isolated (--isolated-imports)"), mode
    failed = [c for c in result["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["sglang.srt.speculative.ngram_info"]
    assert "dependent of a patched module" in failed[0]["detail"]
    assert "NoSuchName" in failed[0]["detail"] and "spec_info" in failed[0]["detail"]


def test_ddtree_catches_a_builder_with_a_wrong_parent(patched):
    target = patched.site_file(f"{SPECULATIVE}/ddtree_utils.py")
    source = target.read_text()
    assert source.count("parents.append(parent)") == 1
    wrong = source.replace("parents.append(parent)", "parents.append(max(parent - 1, 0))")
    with altered(target, wrong):
        code, events, _, _ = patched.smoke("ddtree")
    assert code == 1
    result = suite_events(events)["ddtree"]
    failed = {c["name"] for c in result["checks"] if not c["passed"]}
    assert {"seed", "random_topology"} <= failed
    assert "registration" not in failed and "worker_class" not in failed
    worker_class = next(c for c in result["checks"] if c["name"] == "worker_class")
    assert worker_class["detail"] == "sglang.srt.speculative.dflash_worker.DFlashWorker"
    assert f"site-packages/{SPECULATIVE}/ddtree_utils.py" in result["details"]
    assert "parents=[-1, 0, 0," in result["details"]


def test_server_catches_wrong_algorithm_and_low_accept_length(patched):
    url = "http://{host}:{port}".format(**patched.host.read_stub_config())
    try:
        patched.restart_stub(speculative_algorithm="EAGLE")
        code, events, _, _ = patched.smoke("server")
        result = suite_events(events)["server"]
        assert code == 1 and [c["name"] for c in result["checks"] if not c["passed"]] == [
            "server_info"
        ]
        assert f"GET {url}/server_info" in result["details"]
        assert "expected 'DDTREE', got 'EAGLE'" in result["details"]

        patched.restart_stub(speculative_algorithm="DDTREE", accept_length=0.5)
        code, events, _, _ = patched.smoke("server")
        result = suite_events(events)["server"]
        assert code == 1 and [c["name"] for c in result["checks"] if not c["passed"]] == [
            "acceptance"
        ]
        assert f"POST {url}/generate" in result["details"]
        assert "accept length too low: spec_accept_length 0.500, min 1.0" in result["details"]
    finally:
        patched.restart_stub(speculative_algorithm="DDTREE", accept_length=3.2)
    assert patched.smoke("server")[0] == 0
