"""become = "sudo" on real sshd sandbox hosts: a non-root login user, real sudo, real files.

Three hosts, one sudo policy each (a sudoers.d bind-mounted in the host's namespace):
`sudo` lets ddtree-deploy run the venv's python as root without a password; `pw` wants
a password; `denied` (with `!authenticate`, so sudo says so at once) allows only
/bin/true. The venv (/srv) and state dir are root-owned: the login user alone can change
nothing there.
"""

from __future__ import annotations

import json
import os
import pwd
import time
from pathlib import Path

import pytest

from ddtree_deploy.agent import AgentRequest, Op
from ddtree_deploy.errors import BecomeError
from ddtree_deploy.inventory import load_inventory
from ddtree_deploy.transport import SSHTransport
from tests.support import make_patchset, run_cli
from tests.targets.become_sandbox import LOGIN_USER, start_become_sandbox, write_become_inventory

pytestmark = pytest.mark.hosts

RULES = {
    "sudo": f"{LOGIN_USER} ALL=(root) NOPASSWD: /srv/venv/bin/python\n",
    "pw": f"{LOGIN_USER} ALL=(ALL) ALL\n",
    "denied": f"Defaults:{LOGIN_USER} !authenticate\n{LOGIN_USER} ALL=(root) /bin/true\n",
}
PATCHSET = "ddtree@1.0.0"
REFUSAL_MAX_S = 1.0  # sudo -n must refuse at once, not wait for a prompt


@pytest.fixture(scope="module")
def hosts(base_env, tmp_path_factory):
    """The sandbox, its inventory with become = "sudo" on every host, and a patchsets dir."""
    for sandbox in start_become_sandbox(base_env, RULES):
        tmp = tmp_path_factory.mktemp("become")
        become = {name: {"become": "sudo"} for name in RULES}
        inventory = write_become_inventory(sandbox, tmp / "become.toml", become)
        yield sandbox, inventory, make_patchset(tmp)


def file_meta(site: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """{path: (uid, gid, mode, bytes)} of every file under site/sglang, bytecode included."""
    out = {}
    for dirpath, _dirs, files in os.walk(site / "sglang"):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(site))] = (st.st_uid, st.st_gid, st.st_mode & 0o7777,
                                                path.read_bytes())  # fmt: skip
    return out


def state_listing(host) -> dict[str, tuple[int, int]]:
    """{path: (size, mtime_ns)} of everything in the host's state dir (on disk)."""
    root = host.state_dir_on_disk
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def summary_of(stdout: str) -> dict[str, dict]:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {e["host"]: e for e in events if e["stage"] == "summary"}


def test_push_via_sudo_keeps_root_owners_and_rollback_restores(hosts):
    sandbox, inventory, patchsets = hosts
    host = sandbox.host("sudo")
    site = host.site_packages_on_disk
    before = file_meta(site)
    args = ("-i", str(inventory), "-H", "sudo")
    push = run_cli("push", *args, "--patchsets-dir", str(patchsets), "-p", PATCHSET, "--json")
    assert push.returncode == 0, push.stderr
    after = file_meta(site)
    touched = {p for p in after if p not in before or after[p][3] != before[p][3]}
    assert "sglang/srt/speculative/ddtree_utils.py" in touched  # new file
    assert "sglang/srt/speculative/spec_info.py" in touched  # patched file
    for path in touched:
        uid, gid, mode, _ = after[path]
        assert (uid, gid) == (0, 0), path  # the venv's owner, not the login user
        if path in before:
            assert mode == before[path][2], path
    # the agent logged in as the non-root user and ran as root through sudo
    assert f"Accepted publickey for {LOGIN_USER}" in (host.hostdir / "sshd.log").read_text()
    # so did the service commands it ran: the restarted server runs as root
    pid = int((host.service_dir_on_disk / "server.pid").read_text().split()[0])
    uids = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("Uid:")).split()[1:]  # fmt: skip
    assert uids == ["0", "0", "0", "0"] and pwd.getpwnam(LOGIN_USER).pw_uid != 0

    rollback = run_cli("rollback", *args, "--no-restart")  # the restart is proven above
    assert rollback.returncode == 0, rollback.stderr
    restored = file_meta(site)
    sources = {p: m for p, m in before.items() if "__pycache__" not in p}
    assert {p: m for p, m in restored.items() if "__pycache__" not in p} == sources
    stale = [p for p, m in restored.items() if "__pycache__" in p and m[:2] != (0, 0)]
    assert stale == []  # bytecode written under sudo belongs to root too


@pytest.mark.parametrize(
    ("name", "kind", "sudo_says"),
    [
        ("pw", "password required", "sudo: a password is required"),
        ("denied", "denied", f"Sorry, user {LOGIN_USER} is not allowed to execute"),
    ],
)
def test_a_refusing_rule_is_exit_2_at_once_and_nothing_changes(hosts, name, kind, sudo_says):
    sandbox, inventory, patchsets = hosts
    host = sandbox.host(name)
    tree, state = host.tree_digest(), state_listing(host)
    started = time.monotonic()
    push = run_cli(
        "push", "-i", str(inventory), "-H", name, "--patchsets-dir", str(patchsets),
        "-p", PATCHSET, "--json",
    )  # fmt: skip
    cli_s = time.monotonic() - started
    assert push.returncode == 2, push.stderr
    assert f"{name}: become: {kind}: " in push.stderr and sudo_says in push.stderr
    assert summary_of(push.stdout)[name]["data"]["become"] == kind
    assert host.tree_digest() == tree and state_listing(host) == state
    out = push.stdout + push.stderr
    assert "password for" not in out  # no prompt: sudo -n never asks
    assert RULES[name].strip() not in out  # nor does the host's policy leak
    # the refusal itself, over a fresh SSH connection: sudo answers at once
    target = load_inventory(inventory).hosts[name]
    request = AgentRequest(
        state_dir=target.state_dir, ops=[Op(op="facts", args={"package": "sglang"})]
    )
    with SSHTransport(target) as transport:
        started = time.monotonic()
        with pytest.raises(BecomeError) as refused:
            transport.call(request)
        refusal_s = time.monotonic() - started
    assert refused.value.kind == kind
    assert refusal_s < REFUSAL_MAX_S, f"refused after {refusal_s:.2f}s (CLI {cli_s:.2f}s)"
    print(f"{name}: refused in {refusal_s * 1000:.0f} ms (connect + sudo); CLI {cli_s:.2f}s")


def test_hosts_check_reports_become_per_host(hosts):
    _sandbox, inventory, _ = hosts
    check = run_cli("hosts", "check", "-i", str(inventory), "--all", "--json")
    assert check.returncode == 2, check.stderr  # two hosts refuse
    become = {host: e["data"].get("become") for host, e in summary_of(check.stdout).items()}
    assert become == {"sudo": "ok", "pw": "password required", "denied": "denied"}
    assert "ok (root)" in check.stderr  # the table: the agent's user under sudo


def test_become_flag_turns_sudo_on_for_an_inventory_without_it(hosts, tmp_path):
    sandbox, _inventory, patchsets = hosts
    host = sandbox.host("sudo")
    tree = host.tree_digest()
    # negative control: the login user alone (its own state dir, so that facts can run)
    # cannot keep root's files root's: refused before anything changes
    own_state = sandbox.workdir.parent / "login-user-state"
    own_state.mkdir(exist_ok=True)
    os.chown(own_state, pwd.getpwnam(LOGIN_USER).pw_uid, -1)
    alone_inventory = tmp_path / "alone.toml"
    write_become_inventory(sandbox, alone_inventory, {"sudo": {"state_dir": str(own_state)}})
    alone = run_cli(
        "push", "-i", str(alone_inventory), "-H", "sudo", "--patchsets-dir", str(patchsets),
        "-p", PATCHSET,
    )  # fmt: skip
    assert alone.returncode == 2, alone.stderr
    assert "cannot keep its owner uid 0" in alone.stderr and host.tree_digest() == tree

    plain = write_become_inventory(sandbox, tmp_path / "plain.toml", {})
    args = ("-i", str(plain), "-H", "sudo")
    # --no-restart: the restart under sudo is proven above; this test is about the flag
    push = run_cli(
        "push", *args, "--patchsets-dir", str(patchsets), "-p", PATCHSET, "--become",
        "--no-restart",
    )  # fmt: skip
    assert push.returncode == 0, push.stderr
    status = run_cli("--become", "status", *args, "--json")  # before the command name too
    assert status.returncode == 0, status.stderr
    assert f'"version_now":"{PATCHSET}"' in status.stdout.replace(" ", "")
    rollback = run_cli("rollback", *args, "--become", "--no-restart")
    assert rollback.returncode == 0, rollback.stderr
    assert host.tree_digest() == tree
