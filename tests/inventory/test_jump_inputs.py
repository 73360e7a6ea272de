"""Bad input for the SSH route keys: one clear error, exit 2, and no connection made.

Inventory `jump` values are refused when the inventory loads; ssh_config problems (a
ProxyJump loop, a bad Port, a missing DDTREE_DEPLOY_SSH_CONFIG file) when the route is
resolved, still before any socket opens. A listener on the port every host names proves
nothing dialled out.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ddtree_deploy.inventory.jumps import JumpSpec, parse_jump_spec
from tests.support import run_cli


@pytest.fixture
def listener():
    """A TCP port that records every connection."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1], accepted
    sock.close()


def _inventory(tmp_path: Path, port: int, jump: str, extra: str = "") -> Path:
    """bastion, relay (jumps via bastion) and gpu (jumps via `jump`); a loop case makes
    the bastion jump via gpu."""
    bastion_jump = 'jump = "gpu"\n' if jump == "relay" else ""
    path = tmp_path / "inv.toml"
    path.write_text(
        f'[defaults]\nuser = "root"\nport = {port}\n'
        f'[hosts.bastion]\naddress = "127.0.0.1"\n{bastion_jump}'
        f'[hosts.relay]\naddress = "127.0.0.2"\njump = "bastion"\n'
        f'[hosts.gpu]\naddress = "127.0.0.3"\njump = "{jump}"\n{extra}'
    )
    return path


BAD_JUMPS = {
    "unknown name": ("bastoin", "host 'gpu': key 'jump': 'bastoin' is no host of this inventory"),
    "loop to itself": ("gpu", "jump chain loops: gpu -> gpu"),
    "loop through its first hop": ("relay", "jump chain loops: bastion -> gpu -> relay -> bastion"),
    "empty element": ("bastion,,relay", "empty element in jump chain"),
    "user without host": ("root@", "bad host in 'root@'"),
    "empty user": ("@10.0.0.1", "bad user in '@10.0.0.1'"),
    "port 0": ("10.0.0.1:0", "bad port in '10.0.0.1:0'"),
    "port not a number": ("10.0.0.1:ssh", "bad port in '10.0.0.1:ssh'"),
    "port too big": ("root@10.0.0.1:70000", "bad port"),
    "space in host": ("root@bad host.example", "bad host"),
    "unbracketed ipv6 with port": ("fe80::1:22", "write an IPv6 address as [addr]:port"),
}


@pytest.mark.parametrize("case", sorted(BAD_JUMPS))
def test_bad_jump_is_one_clear_error_exit_2(case, tmp_path, listener):
    port, accepted = listener
    jump, expected = BAD_JUMPS[case]
    inv = _inventory(tmp_path, port, jump)
    done = run_cli("hosts", "check", "--all", "-i", str(inv))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and str(inv) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert accepted == []


def test_jump_hosts_is_set_by_the_loader_only(tmp_path, listener):
    port, accepted = listener
    inv = _inventory(tmp_path, port, "bastion", extra="jump_hosts = []\n")
    done = run_cli("hosts", "check", "--all", "-i", str(inv))
    assert done.returncode == 2
    assert "host 'gpu': unknown key 'jump_hosts'" in done.stderr
    assert accepted == []


@pytest.mark.parametrize(
    "config, expected",
    [
        ("Host gpu-alias\n ProxyJump j1\nHost j1\n HostName 127.0.0.1\n ProxyJump gpu-alias\n",
         "jump chain loops"),
        ("Host gpu-alias\n ProxyJump root@:22\n", "bad host in 'root@:22'"),
        ("Host gpu-alias\n Port 0\n", "bad port '0'"),
        (None, "DDTREE_DEPLOY_SSH_CONFIG="),
    ],
)  # fmt: skip
def test_bad_ssh_config_route_is_refused_exit_2(config, expected, tmp_path, listener):
    port, accepted = listener
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.gpu]\naddress = "gpu-alias"\n')
    ssh_config = tmp_path / "ssh_config"
    if config is not None:
        ssh_config.write_text(config.replace("Host j1\n", f"Host j1\n Port {port}\n"))
    done = run_cli(
        "hosts", "check", "--all", "-i", str(inv), env={"DDTREE_DEPLOY_SSH_CONFIG": str(ssh_config)}
    )
    assert done.returncode == 2, done.stderr
    shown = done.stdout + done.stderr  # the result table is on stdout, the events on stderr
    assert "refused" in shown and expected in shown
    assert accepted == []


@pytest.mark.parametrize(
    "text, spec",
    [
        ("bastion.example", JumpSpec("bastion.example")),
        ("root@10.0.0.1", JumpSpec("10.0.0.1", user="root")),
        ("ops@gw:2222", JumpSpec("gw", user="ops", port=2222)),
        ("[fe80::1]:2200", JumpSpec("fe80::1", port=2200)),
        ("fe80::1", None),
        ("ssh://root@gw:22", JumpSpec("gw", user="root", port=22)),
    ],
)
def test_jump_spec_forms(text, spec):
    if spec is None:
        with pytest.raises(ValueError):
            parse_jump_spec(text)
    else:
        assert parse_jump_spec(text) == spec
        assert parse_jump_spec(spec.text) == spec


def test_same_address_behind_different_jumps_is_no_duplicate():
    from ddtree_deploy.errors import InventoryError
    from ddtree_deploy.inventory import parse_inventory

    hosts = {
        "site-a": {"address": "gw-a.example"},
        "site-b": {"address": "gw-b.example"},
        "gpu-a": {"address": "10.0.0.5", "jump": "site-a"},
        "gpu-b": {"address": "10.0.0.5", "jump": "site-b"},
    }
    inventory = parse_inventory({"hosts": hosts}, "inv.toml")
    assert [h.name for h in inventory.hosts["gpu-a"].jump_hosts] == ["site-a"]
    with pytest.raises(InventoryError, match="host 'gpu-b': duplicate of host 'gpu-a'"):
        parse_inventory({"hosts": {**hosts, "gpu-b": hosts["gpu-a"]}}, "inv.toml")
