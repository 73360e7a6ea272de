"""Security on real sshd hosts: symlinks out of site-packages, unsafe paths at the agent,
inventory values with shell metacharacters, state file modes, secrets kept out of every
output, and a lock that only --break-lock takes (holder shown)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import pytest

from ddtree_deploy.agent import AgentRequest, Op
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport import LocalTransport
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts
SPEC_INFO = "sglang/srt/speculative/spec_info.py"


def _cli(sandbox, *args, patchsets=None, env=None):
    extra = ["-i", str(sandbox.inventory_path)]
    if patchsets is not None:
        extra += ["--patchsets-dir", str(patchsets)]
    return run_cli(*args, *extra, env=env)


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_symlink_out_of_site_packages_is_refused_end_to_end(sandbox_factory, tmp_path, kind):
    """A patched path that resolves outside site-packages: exit 2, the outside target and the
    host's state untouched."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    spec_dir = "/srv/venv/lib/python3.11/site-packages/sglang/srt/speculative"
    outside = "/srv/service/outside"
    if kind == "file":
        script = (f"mkdir -p {outside} && cp {spec_dir}/spec_info.py {outside}/ && "
                  f"ln -sf {outside}/spec_info.py {spec_dir}/spec_info.py")  # fmt: skip
    else:
        script = (f"cp -a {spec_dir} {outside} && rm -rf {spec_dir} && "
                  f"ln -s {outside} {spec_dir}")  # fmt: skip
    assert host.run(script).returncode == 0
    victim = host.service_dir_on_disk / "outside" / "spec_info.py"
    original = victim.read_bytes()
    done = _cli(sandbox, "push", "-H", "host0", patchsets=make_patchset(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "resolves outside" in done.stderr
    assert victim.read_bytes() == original
    assert not (host.service_dir_on_disk / "outside" / "ddtree_utils.py").exists()
    assert not (host.state_dir_on_disk / "journal.jsonl").exists()
    assert not (host.state_dir_on_disk / "lock").exists()


@pytest.mark.parametrize("path", ["../../../../tmp/ddtree-evil.py", "/tmp/ddtree-evil.py",
                                  "sglang/\x00evil.py"])  # fmt: skip
def test_agent_refuses_traversal_paths_in_every_writing_op(tmp_path, path):
    """The agent itself refuses `..`, absolute and NUL paths even if a controller sent them."""
    site = tmp_path / "site"
    site.mkdir()
    host = parse_inventory(
        {"hosts": {"x": {"address": "local", "transport": "local",
                         "python": "/usr/bin/python3", "state_dir": str(tmp_path / "st")}}},
        "mem",
    ).hosts["x"]  # fmt: skip
    spec = {"path": path, "base_sha256": None, "result_sha256": "0" * 64, "content_b64": ""}
    ops = [
        Op(op="backup", args={"deploy_id": "d1", "site_packages": str(site), "paths": [path]}),
        Op(op="install", args={"site_packages": str(site), "files": [spec]}),
        Op(op="compile", args={"site_packages": str(site), "paths": [path]}),
    ]
    with LocalTransport(host) as transport:
        for op in ops:
            reply = transport.call(AgentRequest(state_dir=str(tmp_path / "st"), ops=[op]))
            assert reply.results[0].code == "unsafe_path", reply
    assert not os.path.exists("/tmp/ddtree-evil.py")


def test_metacharacters_in_more_inventory_values_run_nothing(sandbox_factory, tmp_path):
    """Extends tests/transport: start/status commands, log_file, health_url and the smoke
    prompt carry `$(...)`, backticks and `;` through a push, smoke and rollback."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    marker = "/tmp/ddtree-pwned-2"
    subprocess.run(["rm", "-f", marker])
    host.run(["rm", "-f", marker])
    evil = f"$(touch {marker}) `touch {marker}` ; touch {marker}"
    text = sandbox.inventory_path.read_text()
    for action in ("start", "status"):
        text = text.replace(f'sglang_stub.py {action}"', f'sglang_stub.py {action} {evil}"')
    text = text.replace('server.log"', f'server.log {evil}"')
    text = text.replace('/health_generate"', f'/health_generate?{evil}"')
    text = text.replace("[hosts.host0.smoke]\n", f'[hosts.host0.smoke]\nprompt = "{evil}"\n')
    assert text.count(evil) == 5
    sandbox.inventory_path.write_text(text)
    fast = make_patchset(tmp_path, suites=["integrity"], after_restart=["server"])
    _cli(sandbox, "push", "-H", "host0", patchsets=fast)
    _cli(sandbox, "smoke", "-H", "host0", patchsets=fast)
    _cli(sandbox, "rollback", "-H", "host0")
    assert host.run(["test", "-e", marker]).returncode != 0
    assert subprocess.run(["test", "-e", marker]).returncode != 0


def test_backups_journal_lock_and_smoke_files_are_private(sandbox_factory, tmp_path):
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    inv = sandbox.inventory_path
    inv.write_text(inv.read_text().replace("ready_timeout_s = 60", "ready_timeout_s = 60\n"
                                           "poll_interval_s = 0.2"))  # fmt: skip
    host.write_stub_config(startup_delay_s=4)
    proc = subprocess.Popen(
        ["python3", "-m", "ddtree_deploy", "push", "-H", "host0", "-i", str(inv),
         "--patchsets-dir", str(make_patchset(tmp_path)), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )  # fmt: skip
    lock = host.state_dir_on_disk / "lock"
    deadline = time.monotonic() + 60
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    lock_mode = stat.S_IMODE(lock.stat().st_mode)
    proc.communicate(timeout=180)
    assert proc.returncode == 0
    assert lock_mode == 0o600
    top = host.state_dir_on_disk
    assert stat.S_IMODE(top.stat().st_mode) == 0o700
    checked = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            assert stat.S_IMODE((os.stat(os.path.join(dirpath, name))).st_mode) == 0o700, name
        for name in filenames:
            mode = stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode)
            assert mode == 0o600, (dirpath, name, oct(mode))
            checked += 1
    assert checked >= 4  # journal, manifest, 2 backup copies
    # the smoke scripts ran from a private dir of their own (0700), removed afterwards
    assert not [p for p in top.iterdir() if p.name.startswith("smoke")]


def test_keys_and_passphrases_never_reach_any_output(sandbox_factory, tmp_path):
    """A passphrase-protected identity served by ssh-agent: neither the passphrase nor any
    line of the private key appears in stdout JSON, stderr, JUnit or the Markdown summary,
    on a good run nor on one that cannot authenticate."""
    sandbox = sandbox_factory(1)
    passphrase = "correct-horse-battery-9f3a"
    key = tmp_path / "id_locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "", "-f",
                    str(key)], check=True)  # fmt: skip
    authorized = sandbox.workdir / "authorized_keys"
    authorized.write_text(key.with_suffix(".pub").read_text())  # only the locked key logs in
    inv = sandbox.inventory_path
    inv.write_text(inv.read_text().replace(str(sandbox.identity_file), str(key)))
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\necho {passphrase}\n")
    askpass.chmod(0o700)
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {"SSH_AUTH_SOCK": str(sock), "SSH_ASKPASS": str(askpass),
               "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}  # fmt: skip
        subprocess.run(["ssh-add", str(key)], env={**os.environ, **env}, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        secrets = [passphrase] + [
            ln for ln in key.read_text().splitlines() if ln and not ln.startswith("-----")
        ]
        fast = make_patchset(tmp_path, suites=["integrity"])
        runs = []
        for name, run_env in (("agent", {"SSH_AUTH_SOCK": str(sock)}), ("no-agent", {})):
            junit, summary = tmp_path / f"{name}.xml", tmp_path / f"{name}.md"
            base = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
            done = subprocess.run(
                ["python3", "-m", "ddtree_deploy", "push", "-H", "host0", "-i", str(inv),
                 "--patchsets-dir", str(fast), "--json", "--junit", str(junit),
                 "--summary-file", str(summary), "--no-restart"],
                capture_output=True, text=True, env={**base, **run_env},
                cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
            )  # fmt: skip
            outputs = done.stdout + done.stderr + junit.read_text() + summary.read_text()
            runs.append((name, done.returncode, outputs))
        assert [code for _, code, _ in runs] == [0, 3], runs
        for name, _, outputs in runs:
            for secret in secrets:
                assert secret not in outputs, name
            json.loads(outputs.splitlines()[0])  # stdout stays JSON Lines
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_lock_is_taken_only_with_break_lock_and_the_holder_is_shown(sandbox_factory, tmp_path):
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    fast = make_patchset(tmp_path, suites=["integrity"])
    held = {"run_id": "aaaa", "holder": "alice@build-7 pid 4242", "pid": 4242,
            "controller": "build-7", "started": "2026-01-31T12:00:00+00:00",
            "expires_epoch": time.time() + 3600}  # fmt: skip
    lock = host.state_dir_on_disk / "lock"
    lock.write_text(json.dumps(held))
    lock.chmod(0o600)
    before = host.tree_digest()
    for args in (["push", "-H", "host0"], ["rollback", "-H", "host0"],
                 ["backups", "prune", "-H", "host0", "--keep", "1", "--yes"]):  # fmt: skip
        done = _cli(sandbox, *args, patchsets=fast if args[0] == "push" else None)
        assert done.returncode == 4, (args, done.stderr)
        assert "alice@build-7 pid 4242" in done.stderr, args
        assert json.loads(lock.read_text()) == held
    assert host.tree_digest() == before
    taken = _cli(sandbox, "push", "-H", "host0", "--break-lock", "--no-restart", patchsets=fast)
    assert taken.returncode == 0, taken.stderr
    assert "took over the lock of alice@build-7 pid 4242" in taken.stderr
    assert not lock.exists()
