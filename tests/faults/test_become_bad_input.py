"""Bad become input: exit 2, one clear line naming file, host and key (or the host and what
sudo's absence means), and nothing changed on any host.

- become_user that is no user name, become other than "sudo": refused when the inventory
  is read, before any host is contacted.
- become = "sudo" on a host without sudo: a real sshd sandbox host whose login PATH has no
  sudo (the shell answers "sudo: not found", as on a host where it is not installed), and a
  local-transport host where `sudo` cannot be executed.
"""

from __future__ import annotations

import pytest

from ddtree_deploy.agent import AgentRequest, Op
from ddtree_deploy.errors import BecomeError, InventoryError
from ddtree_deploy.inventory import load_inventory, parse_inventory
from ddtree_deploy.transport import LocalTransport
from tests.support import run_cli
from tests.targets.become_sandbox import LOGIN_USER, start_become_sandbox, write_become_inventory


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('become_user = "-root"', "key 'become_user': Value error, must be a user name"),
        ('become_user = "root; reboot"', "key 'become_user'"),
        ('become_user = "a b"', "key 'become_user'"),
        ('become_user = ""', "key 'become_user'"),
        (f'become_user = "{"u" * 40}"', "key 'become_user'"),
        ('become = "su"', "key 'become': Input should be 'sudo'"),
        ("become = true", "key 'become'"),
    ],
)
def test_bad_become_keys_are_refused_naming_file_host_and_key(tmp_path, line, says):
    inventory = tmp_path / "bad.toml"
    become = "" if line.startswith("become =") else 'become = "sudo"\n'
    inventory.write_text(f'[hosts.gpu7]\naddress = "10.0.0.7"\n{become}{line}\n')
    with pytest.raises(InventoryError) as refused:
        load_inventory(inventory)
    assert f"{inventory}: host 'gpu7': {says}" in str(refused.value)


def test_a_bad_become_user_is_exit_2_before_any_host_is_contacted(tmp_path):
    inventory = tmp_path / "bad.toml"  # the address would not answer: nothing is contacted
    inventory.write_text('[hosts.gpu7]\naddress = "192.0.2.7"\nbecome_user = "-root"\n')
    done = run_cli("push", "-i", str(inventory), "--all", "--become")
    assert done.returncode == 2, done.stderr
    assert f"error: {inventory}: host 'gpu7': key 'become_user'" in done.stderr


def test_good_become_users_load():
    for user in ("root", "sglang", "svc_01", "deploy.bot", "build$", "#0", "#1001"):
        raw = {"hosts": {"h": {"address": "a", "become": "sudo", "become_user": user}}}
        assert parse_inventory(raw, "mem").hosts["h"].become_user == user


@pytest.fixture(scope="module")
def no_sudo_host(base_env, tmp_path_factory):
    """One sandbox host whose login user would be allowed, but finds no sudo."""
    rules = {"nosudo": f"{LOGIN_USER} ALL=(root) NOPASSWD: /srv/venv/bin/python\n"}
    for sandbox in start_become_sandbox(base_env, rules, no_sudo=("nosudo",)):
        inventory = tmp_path_factory.mktemp("nosudo") / "inventory.toml"
        yield sandbox, write_become_inventory(sandbox, inventory, {"nosudo": {"become": "sudo"}})


@pytest.mark.hosts
def test_become_on_a_host_without_sudo_is_exit_2_and_changes_nothing(no_sudo_host):
    sandbox, inventory = no_sudo_host
    host = sandbox.host("nosudo")
    tree = host.tree_digest()
    state = sorted(p.name for p in host.state_dir_on_disk.iterdir())
    push = run_cli("push", "-i", str(inventory), "-H", "nosudo", "-p", "ddtree@1.0.0")
    assert push.returncode == 2, push.stderr
    assert "nosudo: become: no sudo: 'sh: 1: sudo: not found'" in push.stderr
    assert 'become = "sudo" but sudo is not installed on the host' in push.stderr
    assert host.tree_digest() == tree
    assert sorted(p.name for p in host.state_dir_on_disk.iterdir()) == state
    check = run_cli("hosts", "check", "-i", str(inventory), "--all")
    assert check.returncode == 2 and "no sudo" in check.stdout + check.stderr


def test_become_on_a_local_host_without_sudo_is_a_become_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no sudo to execute
    raw = {"hosts": {"here": {"address": "local", "transport": "local", "become": "sudo",
                              "state_dir": str(tmp_path / "state")}}}  # fmt: skip
    host = parse_inventory(raw, "mem").hosts["here"]
    request = AgentRequest(state_dir=host.state_dir, ops=[Op(op="facts", args={"package": "x"})])
    with LocalTransport(host) as transport, pytest.raises(BecomeError) as refused:
        transport.call(request)
    assert refused.value.kind == "no sudo" and str(refused.value).startswith("here: become:")
    assert not (tmp_path / "state").exists()
