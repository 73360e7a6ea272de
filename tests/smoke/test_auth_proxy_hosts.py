"""An sglang server that requires an API key, on a host whose SSH sessions carry
http_proxy/HTTP_PROXY pointing at a dead port: a real sshd sandbox host running the stub with
`api_key` (401 on every route but /health* and /metrics, as sglang's middleware does, and
/server_info echoing the key, as sglang's does).

The key lives only inside the host (/srv/service/api_key, or the session variable the host's
sshd sets); the controller never reads it, and no output (JSON Lines, JUnit, stderr) holds it.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w

from ddtree_sandbox import Sandbox, SandboxHost, start_sandbox
from ddtree_sandbox.sshd import SshdSpec
from tests.support import FAST_SUITES, make_patchset, run_cli

pytestmark = pytest.mark.hosts
API_KEY = "sk-sandbox-5f1c9e2a7b"  # what the stub requires; must appear in no output
KEY_FILE = "/srv/service/api_key"  # inside the host (its /srv bind); absent on the controller
KEY_ENV = "DDTREE_SANDBOX_API_KEY"
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens: a request sent there is refused
SESSION_ENV = f"SetEnv http_proxy={DEAD_PROXY} HTTP_PROXY={DEAD_PROXY} {KEY_ENV}={API_KEY}"


def with_proxy_env(host: SandboxHost, spec: SshdSpec) -> SshdSpec:
    """Every SSH session on the host (the agent's too) gets the proxy and the key variable."""
    return dataclasses.replace(spec, extra_config=(*spec.extra_config, SESSION_ENV))


@dataclass
class Keyed:
    """The module's host, its patchsets and one inventory per way of giving the key."""

    sandbox: Sandbox
    patchsets: Path
    workdir: Path

    @property
    def host(self) -> SandboxHost:
        return self.sandbox.hosts[0]

    def inventory(self, name: str, **smoke: str) -> Path:
        """The sandbox inventory with these [smoke] keys for host0, written as `name`."""
        data = tomllib.loads(self.sandbox.inventory_path.read_text())
        data["hosts"]["host0"]["smoke"].update(smoke)
        path = self.workdir / f"{name}.toml"
        path.write_text(tomli_w.dumps(data))
        return path

    def cli(self, inventory: Path, *args: str) -> tuple[int, str, str, str]:
        """Run `args` with --json --junit; return (exit code, JSON Lines, JUnit XML, stderr)."""
        junit = self.workdir / "out.xml"
        junit.unlink(missing_ok=True)
        done = run_cli(
            *args, "-H", "host0", "-p", "ddtree@1.0.0", "--json", "--junit", str(junit),
            "-i", str(inventory), "--patchsets-dir", str(self.patchsets),
        )  # fmt: skip
        xml = junit.read_text() if junit.exists() else ""
        return done.returncode, done.stdout, xml, done.stderr


@pytest.fixture(scope="module")
def keyed(base_env, tmp_path_factory) -> Iterator[Keyed]:
    workdir = tmp_path_factory.mktemp("keyed")
    sandbox = start_sandbox(
        workdir / "sandbox", 1, first_octet=None, base_env=base_env, service="stub",
        customize=with_proxy_env,
    )  # fmt: skip
    try:
        host = sandbox.hosts[0]
        host.write_stub_config(api_key=API_KEY)
        (host.service_dir_on_disk / "api_key").write_text(API_KEY + "\n")
        sandbox.start_services()
        patchsets = make_patchset(workdir / "fast", suites=FAST_SUITES, after_restart=["server"])
        yield Keyed(sandbox, patchsets, workdir)
    finally:
        sandbox.stop()


def assert_no_key(*outputs: str) -> None:
    for text in outputs:
        assert API_KEY not in text


def test_the_proxy_reaches_the_agent_and_plain_urllib_would_follow_it(keyed):
    """The teeth of the push below: in an SSH session on this host the proxy variables are
    set, and a plain urllib request to the local server goes to the dead proxy and fails,
    while a proxy-free one (what the agent and the suites use) gets through."""
    health = f"http://{keyed.host.address}:30000/health_generate"
    probe = (
        "import os, urllib.request as r\n"
        f"print(os.environ.get('http_proxy'), os.environ.get('HTTP_PROXY'))\n"
        f"print(r.build_opener(r.ProxyHandler({{}})).open({health!r}, timeout=5).status)\n"
        f"try:\n r.urlopen({health!r}, timeout=5)\nexcept OSError as exc:\n print('plain:', exc)\n"
    )
    done = run_ssh(keyed, f"{keyed.host.python} -c {quote(probe)}")
    lines = done.stdout.splitlines()
    assert lines[0] == f"{DEAD_PROXY} {DEAD_PROXY}", done.stderr
    assert lines[1] == "200"
    assert lines[2].startswith("plain:") and "refused" in lines[2], lines


def test_a_missing_key_file_is_refused_naming_it_before_anything_changes(keyed):
    before = keyed.host.tree_digest()
    missing = "/srv/service/no-such-key"
    code, jsonl, xml, stderr = keyed.cli(keyed.inventory("missing", api_key_file=missing), "push")
    assert code == 2, stderr
    assert f"smoke.api_key_file {missing}: cannot read: No such file or directory" in jsonl
    assert keyed.host.tree_digest() == before
    assert not (keyed.host.state_dir_on_disk / "journal.jsonl").exists()


def test_push_with_the_key_file_passes_behind_the_dead_proxy(keyed):
    code, jsonl, xml, stderr = keyed.cli(keyed.inventory("file", api_key_file=KEY_FILE), "push")
    assert code == 0, stderr
    suites = [e["data"] for e in map(json.loads, jsonl.splitlines()) if e.get("stage") == "verify"]
    server = [s for s in suites if (s or {}).get("suite") == "server"]
    assert server and server[-1]["passed"], suites
    assert {c["name"] for c in server[-1]["checks"]} >= {"health", "server_info", "generate"}
    assert_no_key(jsonl, xml, stderr)


def test_the_server_suite_without_the_key_fails_saying_what_to_set(keyed):
    code, jsonl, xml, stderr = keyed.cli(keyed.inventory("nokey"), "smoke", "--suite", "server")
    assert code == 1, stderr
    expected = 'HTTP 401 {"error": "Unauthorized"}: the server requires an API key (set '
    for text in (jsonl, xml):
        assert "smoke.api_key_file" in text and "401" in text
    assert expected.replace('"', '\\"') in jsonl
    assert_no_key(jsonl, xml, stderr)


def test_the_key_from_the_agents_environment_works_too(keyed):
    inventory = keyed.inventory("env", api_key_env=KEY_ENV)
    code, jsonl, xml, stderr = keyed.cli(inventory, "smoke", "--suite", "server")
    assert code == 0, stderr
    assert_no_key(jsonl, xml, stderr)


def run_ssh(keyed: Keyed, command: str):
    import subprocess

    argv = keyed.sandbox.ssh_argv(keyed.host, command)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
