"""The route to a host from inventory + ssh_config (pure): precedence, chains, loops."""

from __future__ import annotations

import paramiko
import pytest

from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport.hops import (
    GLOBAL_KNOWN_HOSTS,
    USER_KNOWN_HOSTS,
    BadRoute,
    resolve_route,
)


def _hosts(**hosts):
    return parse_inventory({"hosts": hosts}, "inv.toml").hosts


def _config(text: str):
    return paramiko.SSHConfig.from_text(text).lookup


def test_unset_user_and_port_come_from_ssh_config_then_defaults():
    host = _hosts(gpu={"address": "gpu7"})["gpu"]
    config = _config(
        "Host gpu7\n HostName 10.1.1.7\n User deployer\n Port 2200\n IdentityFile ~/.ssh/k\n"
        " ServerAliveInterval 30\n ConnectTimeout 4\n IdentitiesOnly yes\n"
    )
    (hop,) = resolve_route(host, config, "me")
    assert (hop.hostname, hop.user, hop.port) == ("10.1.1.7", "deployer", 2200)
    assert hop.key_files[-1].endswith("/.ssh/k") and hop.identities_only
    assert (hop.keepalive_s, hop.connect_timeout_s) == (30.0, 4.0)
    assert hop.known_hosts_files == USER_KNOWN_HOSTS + GLOBAL_KNOWN_HOSTS
    (plain,) = resolve_route(host, _config(""), "me")
    assert (plain.hostname, plain.user, plain.port, plain.keepalive_s) == ("gpu7", "me", 22, 15.0)


def test_the_inventory_wins_over_ssh_config():
    host = _hosts(
        gpu={"address": "gpu7", "user": "root", "port": 22, "keepalive_s": 5,
             "identity_file": "/k/id", "known_hosts": "/k/known"}
    )["gpu"]  # fmt: skip
    config = _config("Host gpu7\n User deployer\n Port 2200\n ServerAliveInterval 30\n")
    (hop,) = resolve_route(host, config, "me")
    assert (hop.user, hop.port, hop.keepalive_s) == ("root", 22, 5.0)
    assert hop.key_files == ("/k/id",)
    assert hop.known_hosts_files[0] == "/k/known"
    assert hop.label == "root@gpu7:22" and hop.known_name == "gpu7"


def test_inventory_jump_chain_with_the_first_hops_own_jump():
    hosts = _hosts(
        outer={"address": "1.1.1.1", "user": "a", "identity_file": "/k/outer"},
        bastion={"address": "10.0.0.1", "port": 2201, "jump": "outer"},
        gpu={"address": "10.0.1.7", "jump": "bastion,ops@10.0.0.9:2222", "identity_file": "/k/gpu"},
    )
    hops = resolve_route(hosts["gpu"], _config(""), "me")
    assert [h.describe for h in hops] == [
        "jump host outer (a@1.1.1.1:22)",
        "jump host bastion (me@10.0.0.1:2201)",
        "jump host ops@10.0.0.9:2222 (ops@10.0.0.9:2222)",
        "me@10.0.1.7:22",
    ]
    assert hops[0].key_files == ("/k/outer",)
    assert hops[2].key_files == ("/k/gpu",)  # an address element uses the host's key
    assert hops[-1].known_name == "10.0.1.7" and hops[1].known_name == "[10.0.0.1]:2201"


def test_ssh_config_proxyjump_and_proxycommand():
    host = _hosts(gpu={"address": "gpu7"})["gpu"]
    config = _config(
        "Host gpu7\n ProxyJump bast\nHost bast\n HostName 192.0.2.9\n User b\n"
        " ProxyCommand nc -x proxy:1080 %h %p\n"
    )
    first, last = resolve_route(host, config, "me")
    assert (first.label, first.jump, last.jump) == ("b@192.0.2.9:22", True, False)
    assert first.proxy_command == "nc -x proxy:1080 192.0.2.9 22"
    assert last.proxy_command is None
    # The inventory's jump wins over ssh_config's ProxyJump.
    jumped = _hosts(gpu={"address": "gpu7", "jump": "root@10.9.9.9"})["gpu"]
    assert [h.label for h in resolve_route(jumped, config, "me")] == [
        "root@10.9.9.9:22",
        "me@gpu7:22",
    ]
    none = _config("Host gpu7\n ProxyJump none\n")
    assert len(resolve_route(host, none, "me")) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("Host a\n ProxyJump b\nHost b\n ProxyJump a\n", "loops"),
        ("Host a\n ProxyJump a\n", "loops"),
        ("Host a\n ProxyJump x,,y\n", "empty element"),
        ("Host a\n ProxyJump user@:22\n", "bad host"),
        ("Host a\n Port 99999\n", "bad port"),
        ("Host a\n ServerAliveInterval often\n", "bad serveraliveinterval"),
    ],
)
def test_bad_ssh_config_routes_raise_one_clear_error(text, message):
    host = _hosts(gpu={"address": "a"})["gpu"]
    with pytest.raises(BadRoute, match=message):
        resolve_route(host, _config(text), "me")


def test_keepalive_count_from_the_inventory_else_server_alive_count_max_else_three():
    config = _config("Host gpu7\n ServerAliveCountMax 5\nHost gpu8\n ServerAliveCountMax 0\n")
    (set_here,) = resolve_route(_hosts(gpu={"address": "gpu7", "keepalive_count": 2})["gpu"],
                                config, "me")  # fmt: skip
    (from_config,) = resolve_route(_hosts(gpu={"address": "gpu7"})["gpu"], config, "me")
    (zero,) = resolve_route(_hosts(gpu={"address": "gpu8"})["gpu"], config, "me")
    (default,) = resolve_route(_hosts(gpu={"address": "gpu9"})["gpu"], config, "me")
    assert [h.keepalive_count for h in (set_here, from_config, zero, default)] == [2, 5, 1, 3]
    with pytest.raises(BadRoute, match="serveralivecountmax"):
        resolve_route(
            _hosts(gpu={"address": "x"})["gpu"], _config("Host x\n ServerAliveCountMax a\n"), "me"
        )


def test_a_keepalive_count_below_one_is_refused_naming_the_key():
    from ddtree_deploy.errors import InventoryError

    with pytest.raises(InventoryError, match="host 'gpu': key 'keepalive_count'"):
        _hosts(gpu={"address": "gpu7", "keepalive_count": 0})
