"""The sandbox: real sshd hosts, each with its own /srv venv and real sglang, plus the stub."""

from __future__ import annotations

import json
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ddtree_sandbox import start_sandbox, stop_sandbox
from ddtree_sandbox.baseenv import compute_base_key, read_requirement_pins
from ddtree_sandbox.inventory_file import render_toml
from ddtree_sandbox.processes import is_running, read_pid_file

HOST_SGLANG = "/srv/venv/lib/python3.11/site-packages/sglang/__init__.py"
STUB = "/srv/venv/bin/python /srv/service/sglang_stub.py"


@pytest.fixture(scope="module")
def two_hosts(base_env, tmp_path_factory):
    """Two hosts shared by the read-mostly tests of this module."""
    sandbox = start_sandbox(tmp_path_factory.mktemp("two-hosts"), 2, first_octet=None,
                            base_env=base_env, service="stub")  # fmt: skip
    yield sandbox
    sandbox.stop()


def ssh(sandbox, host, command: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        sandbox.ssh_argv(host, command), capture_output=True, text=True, timeout=timeout_s
    )


def http_get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except OSError:
        return 0, {}


def wait_for(predicate, timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return False


@pytest.mark.hosts
def test_inventory_describes_hosts_in_product_format(two_hosts):
    raw = tomllib.loads(two_hosts.inventory_path.read_text())
    assert raw["defaults"]["python"] == "/srv/venv/bin/python"
    assert raw["defaults"]["port"] == 2222
    assert raw["defaults"]["service"]["kind"] == "command"
    host0 = two_hosts.hosts[0]
    assert raw["hosts"]["host0"]["address"] == host0.address
    url = f"http://{host0.address}:30000"
    assert raw["hosts"]["host0"]["service"]["health_url"] == f"{url}/health_generate"
    assert raw["hosts"]["host0"]["smoke"]["server_url"] == url
    from ddtree_deploy.inventory import load_inventory

    inventory = load_inventory(two_hosts.inventory_path)
    assert inventory.hosts["host1"].address == two_hosts.hosts[1].address
    assert inventory.hosts["host1"].service.start == f"{STUB} start"


@pytest.mark.hosts
def test_ssh_import_resolves_the_hosts_own_sglang(two_hosts):
    host = two_hosts.hosts[0]
    command = (
        '/srv/venv/bin/python -c "import sglang.srt.speculative.spec_info, sys; '
        'print(sglang.__file__)"'
    )
    argv = [
        "ssh", "-i", str(two_hosts.identity_file),
        "-o", f"UserKnownHostsFile={two_hosts.known_hosts}", "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes", "-p", "2222", f"root@{host.address}", command,
    ]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == HOST_SGLANG


@pytest.mark.hosts
def test_each_host_has_its_own_srv_home_and_state(two_hosts):
    host0, host1 = two_hosts.hosts
    command = "echo one > /srv/marker && touch /root/h /var/lib/ddtree-deploy/s"
    wrote = ssh(two_hosts, host0, command)
    assert wrote.returncode == 0, wrote.stderr
    assert (host0.hostdir / "srv" / "marker").read_text() == "one\n"
    assert (host0.hostdir / "home" / "h").exists()
    assert (host0.state_dir_on_disk / "s").exists()
    assert ssh(two_hosts, host1, "test -e /srv/marker").returncode == 1
    assert host1.run("test -e /var/lib/ddtree-deploy/s").returncode == 1
    assert not Path("/srv/marker").exists()


@pytest.mark.hosts
def test_tree_digest_is_stable_and_sees_changes(two_hosts):
    host = two_hosts.hosts[1]
    before = host.tree_digest()
    assert "srt/speculative/spec_info.py" in before
    assert host.tree_digest() == before
    assert two_hosts.hosts[0].tree_digest() == before
    target = host.site_packages_on_disk / "sglang" / "srt" / "speculative" / "spec_info.py"
    original = target.read_bytes()
    target.write_bytes(original + b"\n# changed\n")
    try:
        assert (
            host.tree_digest()["srt/speculative/spec_info.py"]
            != before["srt/speculative/spec_info.py"]
        )
    finally:
        target.write_bytes(original)


@pytest.mark.hosts
def test_stub_service_starts_serves_and_stops(two_hosts):
    host = two_hosts.hosts[0]
    started = ssh(two_hosts, host, f"{STUB} start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert ssh(two_hosts, host, f"{STUB} status").returncode == 0
        health = f"http://{host.address}:30000/health_generate"
        assert wait_for(lambda: http_get(health)[0] == 200, timeout_s=60)
        _, info = http_get(f"http://{host.address}:30000/server_info")
        assert info["speculative_algorithm"] == "DDTREE"
        assert info["version"] == "0.5.13.post1"
        assert info["internal_states"][0]["avg_spec_accept_length"] == 3.2
        body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 8}}).encode()
        request = urllib.request.Request(f"http://{host.address}:30000/generate", data=body)
        with urllib.request.urlopen(request, timeout=5) as response:
            meta = json.loads(response.read())["meta_info"]
        assert meta["completion_tokens"] == 8 and meta["spec_accept_length"] == 3.2
    finally:
        stopped = ssh(two_hosts, host, f"{STUB} stop")
    assert stopped.returncode == 0
    assert ssh(two_hosts, host, f"{STUB} status").returncode == 3
    log = (host.service_dir_on_disk / "server.log").read_text()
    assert "The server is fired up and ready to roll!" in log
    assert HOST_SGLANG in log


@pytest.mark.hosts
def test_stub_fail_start_and_broken_patch_never_get_healthy(two_hosts):
    host = two_hosts.hosts[1]
    host.write_stub_config(fail_start=True)
    try:
        assert ssh(two_hosts, host, f"{STUB} start").returncode == 1
        assert ssh(two_hosts, host, f"{STUB} status").returncode == 3
    finally:
        host.write_stub_config(fail_start=False)
    target = host.site_packages_on_disk / "sglang" / "srt" / "speculative" / "spec_info.py"
    original = target.read_bytes()
    target.write_bytes(original + b"\nraise ImportError('sandbox test: broken patch')\n")
    try:
        ssh(two_hosts, host, f"{STUB} start")
        assert wait_for(lambda: host.run(f"{STUB} status").returncode == 3, timeout_s=60)
        assert http_get(f"http://{host.address}:30000/health_generate")[0] == 0
        log = (host.service_dir_on_disk / "server.log").read_text()
        assert "sandbox test: broken patch" in log
    finally:
        target.write_bytes(original)
        ssh(two_hosts, host, f"{STUB} stop")


@pytest.mark.hosts
def test_stop_leaves_nothing_running_even_after_a_crash(sandbox_factory):
    sandbox = sandbox_factory(2)
    host = sandbox.hosts[0]
    host.write_stub_config(never_ready=True, startup_delay_s=0)
    assert ssh(sandbox, host, f"{STUB} start").returncode == 0
    service_pid = read_pid_file(host.service_dir_on_disk / "server.pid")
    sshd_pids = [h.sshd_pid() for h in sandbox.hosts]
    assert service_pid and all(sshd_pids)
    # As after a crashed run: only the workdir's pid files are left to go by.
    assert stop_sandbox(sandbox.workdir)
    assert not is_running(service_pid)
    assert not any(is_running(pid) for pid in sshd_pids)
    assert not any(h.sshd_pid_file.exists() for h in sandbox.hosts)


def test_render_toml_round_trips():
    data = {
        "defaults": {"user": "root", "port": 2222, "service": {"kind": "command", "t": 1.5}},
        "hosts": {"h-0": {"groups": ["a", "b"], "ok": True, "smoke": {"url": 'x"y'}}},
    }
    assert tomllib.loads(render_toml(data)) == data


def test_requirement_pins_and_cache_key():
    pins = read_requirement_pins("Jinja2==3.1.6\n# note\ntyping_extensions==4.16.0\n")
    assert pins == [("jinja2", "3.1.6"), ("typing-extensions", "4.16.0")]
    key = compute_base_key("a==1", "torch==2.13.0", "3.11.2", "d")
    assert len(key) == 12
    assert key != compute_base_key("a==2", "torch==2.13.0", "3.11.2", "d")
    with pytest.raises(ValueError):
        read_requirement_pins("numpy>=2\n")


def test_failed_build_leaves_no_cache_entry(tmp_path):
    from ddtree_sandbox.baseenv import _is_ready, _temp_build_dir

    final = tmp_path / "base-abc"
    with pytest.raises(RuntimeError), _temp_build_dir(tmp_path, final) as tmp:
        tmp.mkdir()
        (tmp / "half-written").write_text("x")
        raise RuntimeError("pip died")
    assert not final.exists() and not list(tmp_path.glob(".tmp-*"))
    with _temp_build_dir(tmp_path, final) as tmp:
        tmp.mkdir()
        (tmp / "ready").write_text("{}")
    assert _is_ready(final) and not list(tmp_path.glob(".tmp-*"))
