"""Jump hosts on real sshd hosts: the target is reachable ONLY through the bastion.

controller (root namespace) <-> bastion (its own netns) <-> target (its own netns), no IP
forwarding on the bastion and no route from the controller to the target's link. Proves:
push and rollback through the bastion (inventory `jump`, and an ssh_config alias with
ProxyJump), an unknown or changed bastion key refused with exit 2 naming the bastion and
nothing written on the target, and an ssh_config alias's User/Port used as written.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import tomli_w

from tests.support import make_patchset, run_cli
from tests.transport.netns import JumpNetwork

pytestmark = pytest.mark.hosts
ALIAS_PORT = 2299  # the target's second sshd port, used only through the ssh_config alias
DEPLOYER = "ddtree-deployer"


@dataclass
class JumpTopology:
    net: JumpNetwork
    sandbox: object
    workdir: Path
    home: Path  # HOME of the CLI: its ~/.ssh/config is the alias config
    patchsets: Path
    deployer_uid: int

    @property
    def bastion(self):
        return self.sandbox.host("bastion")

    @property
    def target(self):
        return self.sandbox.host("target")

    def key_line(self, name: str, address: str, port: int) -> str:
        key = self.sandbox.hosts[0].hostdir.parent / name / "etc" / "ssh_host_ed25519_key.pub"
        kind, blob = key.read_text().split()[:2]
        return f"[{address}]:{port} {kind} {blob}"

    def write_known_hosts(self, bastion: bool = True, bastion_line: str | None = None) -> Path:
        """known_hosts with the target (both ports) and, unless told not to, the bastion."""
        lines = [
            self.key_line("target", self.net.target_ip, 2222),
            self.key_line("target", self.net.target_ip, ALIAS_PORT),
        ]
        if bastion:
            lines.append(bastion_line or self.key_line("bastion", self.net.bastion_ip, 2222))
        path = self.sandbox.known_hosts  # what the inventories name
        path.write_text("\n".join(lines) + "\n")
        return path

    def cli(self, *args: str, inventory: str = "jump.toml", **env: str):
        return run_cli(
            *args, "-i", str(self.workdir / inventory), env={"HOME": str(self.home), **env}
        )

    def target_state(self) -> tuple[dict[str, str], list[str]]:
        """The target's sglang tree digest and its state dir listing."""
        return self.target.tree_digest(), sorted(os.listdir(self.target.state_dir_on_disk))


def _inventories(topology: JumpTopology) -> None:
    """jump.toml: target with `jump = "bastion"`; alias.toml: target as ssh_config alias
    `gpu-via-bastion` (ProxyJump in ~/.ssh/config); user.toml: host `gpu` as alias
    `gpu-as-deployer` (User/Port from the file DDTREE_DEPLOY_SSH_CONFIG names)."""
    net, workdir = topology.net, topology.workdir
    data = tomllib.loads(topology.sandbox.inventory_path.read_text())
    defaults = data["defaults"]
    defaults.pop("port")
    hosts = data["hosts"]
    hosts["bastion"].update(address=net.bastion_ip, port=2222)
    hosts["target"].update(address=net.target_ip, port=2222, jump="bastion")
    (workdir / "jump.toml").write_text(tomli_w.dumps(data))
    target = dict(hosts["target"])
    for key in ("port", "jump"):
        target.pop(key)
    aliased = {
        "defaults": {**defaults},
        "hosts": {"target": {**target, "address": "gpu-via-bastion"}},
    }
    aliased["defaults"].pop("user")
    (workdir / "alias.toml").write_text(tomli_w.dumps(aliased))
    # The deployer reads no root-only state: its own state dir (same /tmp in the target).
    state_dir = workdir / "deployer-state"
    state_dir.mkdir()
    os.chown(state_dir, topology.deployer_uid, -1)
    gpu = {**target, "address": "gpu-as-deployer", "state_dir": str(state_dir)}
    as_user = {"defaults": {**aliased["defaults"]}, "hosts": {"gpu": gpu}}
    (workdir / "user.toml").write_text(tomli_w.dumps(as_user))
    ssh_dir = topology.home / ".ssh"
    ssh_dir.mkdir(parents=True)
    (ssh_dir / "config").write_text(
        f"Host gpu-via-bastion\n  HostName {net.target_ip}\n  User root\n  Port 2222\n"
        f"  ProxyJump bastion-alias\n"
        f"Host bastion-alias\n  HostName {net.bastion_ip}\n  User root\n  Port 2222\n"
    )
    (workdir / "deployer_ssh_config").write_text(
        f"Host gpu-as-deployer\n  HostName {net.target_ip}\n  User {DEPLOYER}\n"
        f"  Port {ALIAS_PORT}\n  ProxyJump root@{net.bastion_ip}:2222\n"
    )


@pytest.fixture(scope="module")
def topology(base_env, tmp_path_factory):
    from ddtree_sandbox import start_sandbox
    from ddtree_sandbox.users import ensure_login_user

    deployer_uid = ensure_login_user(DEPLOYER)
    # sshd reads AuthorizedKeysFile as the login user: the whole path must be readable.
    workdir = Path(tempfile.mkdtemp(prefix="ddtree-jump-", dir="/tmp"))
    workdir.chmod(0o755)
    net = JumpNetwork.create()
    sandbox = None
    try:

        def customize(host, spec):
            if host.name == "bastion":
                return replace(spec, address=net.bastion_ip, netns=net.bastion_ns)
            extra = (f"ListenAddress {net.target_ip}:{ALIAS_PORT}", "LogLevel VERBOSE")
            return replace(spec, address=net.target_ip, netns=net.target_ns, extra_config=extra)

        sandbox = start_sandbox(
            workdir / "sandbox", 2, names=["bastion", "target"], base_env=base_env,
            first_octet=None, service="stub", customize=customize,
        )  # fmt: skip
        (workdir / "sandbox" / "authorized_keys").chmod(0o644)
        topology = JumpTopology(
            net,
            sandbox,
            workdir,
            workdir / "home",
            make_patchset(tmp_path_factory.mktemp("ps")),
            deployer_uid,
        )
        _inventories(topology)
        yield topology
    finally:
        if sandbox is not None:
            sandbox.stop()
        net.down()
        shutil.rmtree(workdir, ignore_errors=True)


def _events(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _push_and_rollback(topology: JumpTopology, inventory: str) -> None:
    """Push (target's files change), hosts check (route shows the bastion), rollback
    (byte-identical again)."""
    topology.write_known_hosts()
    before = topology.target.tree_digest()
    ps = str(topology.patchsets)
    done = topology.cli("push", "-H", "target", "--patchsets-dir", ps, inventory=inventory)
    assert done.returncode == 0, done.stderr
    assert topology.target.tree_digest() != before
    check = topology.cli("hosts", "check", "-H", "target", "--json", inventory=inventory)
    assert check.returncode == 0, check.stderr
    summary = next(e for e in _events(check) if e["stage"] == "summary")
    assert "via jump host" in summary["message"]
    assert topology.net.bastion_ip in summary["message"]
    back = topology.cli("rollback", "-H", "target", inventory=inventory)
    assert back.returncode == 0, back.stderr
    assert topology.target.tree_digest() == before


def test_the_target_has_no_route_from_the_controller(topology):
    """The negative control of the topology: a direct connection cannot work."""
    with pytest.raises(OSError):
        socket.create_connection((topology.net.target_ip, 2222), timeout=2)


def test_push_through_the_inventory_jump_host(topology):
    _push_and_rollback(topology, "jump.toml")


def test_push_through_an_ssh_config_alias_with_proxyjump(topology):
    _push_and_rollback(topology, "alias.toml")


@pytest.mark.parametrize("inventory", ["jump.toml", "alias.toml"])
def test_unknown_bastion_key_is_refused_and_nothing_is_written(topology, inventory):
    """Bastion absent from known_hosts: exit 2 naming the bastion, target untouched, no key
    added (today's main: `jump` ignored -> exit 3; ProxyJump auto-adds -> the push lands)."""
    known_hosts = topology.write_known_hosts(bastion=False)
    listed = known_hosts.read_text()
    before = topology.target_state()
    ps = str(topology.patchsets)
    done = topology.cli("push", "-H", "target", "--patchsets-dir", ps, inventory=inventory)
    assert done.returncode == 2, done.stderr
    assert "jump host" in done.stderr and "unknown host key SHA256:" in done.stderr
    assert f"{topology.net.bastion_ip}:2222" in done.stderr
    assert topology.target_state() == before
    assert known_hosts.read_text() == listed
    assert not (topology.home / ".ssh" / "known_hosts").exists()


def test_changed_bastion_key_is_refused(topology, tmp_path):
    key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    other = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    topology.write_known_hosts(bastion_line=f"[{topology.net.bastion_ip}]:2222 {other}")
    before = topology.target_state()
    ps = str(topology.patchsets)
    done = topology.cli("push", "-H", "target", "--patchsets-dir", ps)
    assert done.returncode == 2, done.stderr
    assert "jump host bastion" in done.stderr and "host key CHANGED" in done.stderr
    assert topology.target_state() == before


def test_ssh_config_alias_user_and_port_are_used(topology):
    """`User ddtree-deployer` / `Port 2299` from ssh_config: the target's sshd logs that
    user logging in on that port (the inventory sets neither)."""
    topology.write_known_hosts()
    log = topology.target.hostdir / "sshd.log"
    logged = len(log.read_text())
    config = str(topology.workdir / "deployer_ssh_config")
    done = topology.cli(
        "hosts", "check", "-H", "gpu", "--json", inventory="user.toml",
        DDTREE_DEPLOY_SSH_CONFIG=config,
    )  # fmt: skip
    new = log.read_text()[logged:]
    assert f"Accepted publickey for {DEPLOYER}" in new, (new, done.stderr)
    assert f"on {topology.net.target_ip} port {ALIAS_PORT}" in new
    assert done.returncode == 0, done.stderr
    summary = next(e for e in _events(done) if e["stage"] == "summary")
    assert f"{DEPLOYER}@" not in summary["message"]  # the message names jump hosts only


def test_every_hop_keeps_its_link_alive_and_the_first_has_nodelay(topology, monkeypatch):
    """In process: one route (bastion, target) serves every call; keepalive is on for each
    hop (a 15-minute health wait must not lose an idle link) and the first hop's TCP socket
    has TCP_NODELAY."""
    from ddtree_deploy.agent import AgentRequest, Op
    from ddtree_deploy.inventory import load_inventory
    from ddtree_deploy.transport import SSHTransport

    topology.write_known_hosts()
    empty = topology.workdir / "empty_ssh_config"
    empty.write_text("")
    monkeypatch.setenv("DDTREE_DEPLOY_SSH_CONFIG", str(empty))
    host = load_inventory(topology.workdir / "jump.toml").hosts["target"]
    with SSHTransport(host) as transport:
        for _ in range(2):
            reply = transport.call(AgentRequest(state_dir=host.state_dir, ops=[Op(op="facts")]))
            assert reply.ok
        assert transport.stats.connects == 1
        net = topology.net
        assert transport.route() == [
            f"jump host bastion (root@{net.bastion_ip}:2222)",
            f"host root@{net.target_ip}:2222",
        ]
        links = [client.get_transport() for client in transport._clients]
        # every hop is asked for keepalive replies (transport/alive.py), 3 missed: lost
        assert transport._watch is not None and transport._watch.watched == [
            (f"jump host bastion (root@{net.bastion_ip}:2222)", 15.0, 3),
            ("target", 15.0, 3),
        ]
        first = links[0].sock
        assert first.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_proxycommand_route_still_checks_the_target_key(topology):
    """ssh_config ProxyCommand (OpenSSH's own `ssh -W` through the bastion) carries the link;
    the target's key is still ours to check: listed -> ok, absent -> exit 2."""
    sandbox, net = topology.sandbox, topology.net
    config = topology.workdir / "proxycommand_ssh_config"
    config.write_text(
        f"Host gpu-via-bastion\n  HostName {net.target_ip}\n  User root\n  Port 2222\n"
        f"  ProxyCommand ssh -i {sandbox.identity_file} -o UserKnownHostsFile={sandbox.known_hosts}"
        f" -o StrictHostKeyChecking=yes -o BatchMode=yes -p 2222 -W %h:%p root@{net.bastion_ip}\n"
    )
    env = {"DDTREE_DEPLOY_SSH_CONFIG": str(config)}
    topology.write_known_hosts()
    done = topology.cli("hosts", "check", "-H", "target", "--json", inventory="alias.toml", **env)
    assert done.returncode == 0, done.stderr
    summary = next(e for e in _events(done) if e["stage"] == "summary")
    assert "via" not in summary["message"]  # one SSH hop: the command is no hop of ours
    path = sandbox.known_hosts
    path.write_text(
        "".join(line + "\n" for line in path.read_text().splitlines() if net.target_ip not in line)
    )
    refused = topology.cli("hosts", "check", "-H", "target", inventory="alias.toml", **env)
    assert refused.returncode == 2, refused.stderr
    assert f"root@{net.target_ip}:2222: unknown host key SHA256:" in refused.stderr
