"""Inventories: defaults merge, and bad ones refused with one line, exit 2, no connection."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory import load_inventory, parse_inventory, select_hosts
from tests.support import run_cli

GOOD = """
[defaults]
user = "root"
python = "/root/ml-env/bin/python3"
[defaults.service]
kind = "systemd"
unit = "sglang.service"
ready_timeout_s = 900

[hosts.a]
address = "ADDR"
port = PORT
groups = ["prod"]
[hosts.a.service]
health_url = "http://127.0.0.1:31000/health_generate"

[hosts.b]
address = "10.0.0.2"
gpus = 8
"""


@pytest.fixture
def listener():
    """A TCP port that counts connections: proves a command never dialled out."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1], accepted
    sock.close()


def write(tmp_path: Path, text: str, port: int = 22) -> Path:
    path = tmp_path / "inv.toml"
    path.write_text(text.replace("ADDR", "127.0.0.1").replace("PORT", str(port)))
    return path


def test_defaults_merge_per_key_including_subtables(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    a, b = inv.hosts["a"], inv.hosts["b"]
    assert a.python == "/root/ml-env/bin/python3" and a.groups == ("prod",)
    assert a.service.unit == "sglang.service" and a.service.ready_timeout_s == 900
    assert a.service.health_url.endswith(":31000/health_generate")
    assert b.service.health_url == "http://127.0.0.1:30000/health_generate"
    assert b.gpus == 8 and b.state_dir == "/var/lib/ddtree-deploy"
    assert [h.name for h in select_hosts(inv, groups=["prod"])] == ["a"]
    assert [h.name for h in select_hosts(inv, all_hosts=True, limit="b*")] == ["b"]


def test_example_inventory_describes_ct129():
    inv = load_inventory(Path(__file__).resolve().parents[2] / "inventories" / "example.toml")
    ct = inv.hosts["ct129"]
    assert (ct.address, ct.user, ct.python) == ("10.1.230.172", "root", "/root/ml-env/bin/python3")
    assert ct.service.kind == "systemd" and ct.service.unit == "sglang.service"


BAD = {
    "missing_address": ("[hosts.x]\nport = 22\n", "host 'x': missing required key 'address'"),
    "bad_port": ('[hosts.x]\naddress = "h"\nport = 70000\n', "host 'x': key 'port'"),
    "port_not_int": ('[hosts.x]\naddress = "h"\nport = "ssh"\n', "host 'x': key 'port'"),
    "unknown_key": ('[hosts.x]\naddress = "h"\nadress = "h"\n', "unknown key 'adress'"),
    "unknown_top": ('[host.x]\naddress = "h"\n', "unknown top-level key 'host'"),
    "unknown_service_kind": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "docker"\n',
        "key 'service.kind'",
    ),
    "systemd_without_unit": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "systemd"\n',
        "needs 'unit'",
    ),
    "service_and_services": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "none"\n'
        '[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n',
        "host 'x': give one [service] table or [[services]] tables, not both",
    ),
    "services_same_name": (
        '[hosts.x]\naddress = "h"\n[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n'
        '[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n',
        "host 'x': services: two services are named 'a' (set 'name')",
    ),
    "services_two_serve_files": (
        '[hosts.x]\naddress = "h"\n[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n'
        'args_file = "/e/a.env"\n[[hosts.x.services]]\nkind = "systemd"\nunit = "b"\n',
        "services: the servers of one env read one serve file",
    ),
    "services_with_a_none": (
        '[hosts.x]\naddress = "h"\n[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n'
        '[[hosts.x.services]]\nkind = "none"\n',
        "kind = 'none' cannot be one of several services",
    ),
    "services_bad_name": (
        '[hosts.x]\naddress = "h"\n[[hosts.x.services]]\nkind = "systemd"\nunit = "a"\n'
        'name = "-a b"\n',
        "key 'services.0.name'",
    ),
    "drain_bad_router": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "systemd"\nunit = "a"\n'
        'drain = { router = "router:30000", worker_url = "http://h:30000" }\n',
        "key 'service.drain.router'",
    ),
    "hook_unsplittable": (
        '[hosts.x]\naddress = "h"\n[hosts.x.hooks]\npre_restart = "run \'half"\n',
        "key 'hooks.pre_restart'",
    ),
    "group_unknown_member": (
        '[groups.g]\nmembers = ["x", "y"]\nleader = "x"\n'
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "systemd"\nunit = "a"\n',
        "group 'g': member 'y' is not an inventory host",
    ),
    "group_leader_not_member": (
        '[groups.g]\nmembers = ["x", "y"]\nleader = "z"\n[hosts.x]\naddress = "h"\n',
        "group 'g': leader 'z' is not one of members",
    ),
    "group_without_leader": (
        '[groups.g]\nmembers = ["x", "y"]\n[hosts.x]\naddress = "h"\n',
        "group 'g': a restart group needs 'members' and 'leader'",
    ),
    "group_member_without_service": (
        '[groups.g]\nmembers = ["x", "y"]\nleader = "x"\n'
        '[hosts.x]\naddress = "h"\n[hosts.y]\naddress = "i"\n',
        "group 'g': member 'x' needs a systemd or command service",
    ),
    "worker_without_status": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "command"\nstart = "s"\n'
        'stop = "t"\nrole = "worker"\n',
        "role = 'worker' has no health endpoint: its liveness needs 'status'",
    ),
    "group_leader_only_workers": (
        '[defaults.service]\nkind = "systemd"\nunit = "sglang.service"\nrole = "worker"\n'
        '[groups.g]\nmembers = ["x", "y"]\nleader = "x"\n'
        '[hosts.x]\naddress = "h"\n[hosts.y]\naddress = "i"\n',
        "group 'g': leader 'x' has only role = 'worker' services",
    ),
    "negative_stagger": ('[hosts.x]\naddress = "h"\nstagger_s = -1\n', "key 'stagger_s'"),
    "duplicate_host": (
        '[hosts.x]\naddress = "h"\n[hosts.y]\naddress = "h"\n',
        "host 'y': duplicate of host 'x'",
    ),
    "toml_syntax": ('[hosts.x\naddress = "h"\n', "TOML syntax error"),
    "relative_python": ('[hosts.x]\naddress = "h"\npython = "bin/python"\n', "key 'python'"),
    "no_hosts": ('[defaults]\nuser = "root"\n', "no [hosts.NAME] tables"),
    "bad_health_url": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nhealth_url = "localhost:1"\n',
        "health_url must be http",
    ),
    "bad_fail_pattern": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nfail_patterns = ["CUDA (out"]\n',
        "key 'service.fail_patterns': Value error, not a regular expression: 'CUDA (out'",
    ),
    "empty_progress_pattern": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nprogress_patterns = [""]\n',
        "an empty pattern matches every line",
    ),
    "unsplittable_command": (
        '[hosts.x]\naddress = "h"\n[hosts.x.service]\nkind = "command"\n'
        'start = "run \'unclosed"\nstop = "x"\n',
        "cannot split command",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inventory_is_one_clear_error(case, tmp_path):
    text, expected = BAD[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert expected in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--group", "nope"], "unknown group 'nope'"),
        (["--host", "zz"], "unknown host 'zz'"),
        ([], "no target"),
        (["--all", "--limit", "q*"], "matches no host"),
    ],
)
def test_cli_bad_target_exit_2_without_connecting(args, expected, tmp_path, listener):
    port, accepted = listener
    inv = write(tmp_path, GOOD, port)
    done = run_cli("status", "-i", str(inv), *args)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and str(inv) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert accepted == []


def test_cli_missing_inventory_file_exit_2(tmp_path):
    done = run_cli("push", "-i", str(tmp_path / "absent.toml"), "--all")
    assert done.returncode == 2
    assert "absent.toml: inventory file not found" in done.stderr


def test_cli_bad_inventory_exit_2_names_file_host_key(tmp_path, listener):
    port, accepted = listener
    inv = write(tmp_path, GOOD.replace("gpus = 8", "gpus = -1"), port)
    done = run_cli("push", "-i", str(inv), "--all")
    assert done.returncode == 2
    assert f"{inv}: host 'b': key 'gpus'" in done.stderr
    assert accepted == []


def test_env_var_names_the_default_inventory(tmp_path):
    inv = write(tmp_path, GOOD)
    done = run_cli("status", "--host", "zz", env={"DDTREE_DEPLOY_INVENTORY": str(inv)})
    assert done.returncode == 2 and str(inv) in done.stderr


def test_parse_inventory_is_pure():
    inv = parse_inventory({"hosts": {"x": {"address": "h", "transport": "local"}}}, "mem")
    assert inv.hosts["x"].transport == "local"


def test_services_merge_over_the_default_service_table_in_order(tmp_path):
    inv = tmp_path / "inv.toml"
    inv.write_text(
        '[defaults.service]\nkind = "command"\nstart = "s"\nstop = "t"\nready_timeout_s = 900\n'
        '[hosts.x]\naddress = "h"\nstagger_s = 5\n'
        '[[hosts.x.services]]\nname = "gpu0"\nhealth_url = "http://h:30000/health"\n'
        '[[hosts.x.services]]\nkind = "systemd"\nunit = "sglang@1.service"\n'
        '[hosts.y]\naddress = "i"\n'
    )
    hosts = load_inventory(inv).hosts
    x = hosts["x"]
    assert [name for _, name in x.named_services()] == ["gpu0", "sglang@1.service"]
    assert [s.ready_timeout_s for s in x.services] == [900, 900]  # [defaults.service] keys
    assert x.services[1].kind == "systemd" and x.service == x.services[0]  # the first leads
    assert x.stagger_s == 5
    assert [name for _, name in hosts["y"].named_services()] == ["service"]  # the one-table case


def test_restart_groups_select_as_a_whole_or_not_at_all(tmp_path):
    from ddtree_deploy.inventory.select import selected_restart_groups

    inv = tmp_path / "inv.toml"
    inv.write_text(
        '[defaults.service]\nkind = "systemd"\nunit = "sglang.service"\n'
        '[groups.g]\nmembers = ["a", "b"]\nleader = "a"\n'
        '[hosts.a]\naddress = "h1"\n[hosts.b]\naddress = "h2"\n[hosts.c]\naddress = "h3"\n'
    )
    inventory = load_inventory(inv)
    group = inventory.restart_groups["g"]
    assert group.workers == ("b",) and inventory.restart_group_of("b") == group
    chosen = select_hosts(inventory, groups=["g"])  # -g NAME selects its members
    assert [h.name for h in chosen] == ["a", "b"]
    assert selected_restart_groups(inventory, chosen) == (group,)
    alone = select_hosts(inventory, names=["b", "c"])
    with pytest.raises(InventoryError, match="b of restart group 'g' selected without a"):
        selected_restart_groups(inventory, alone)
    assert selected_restart_groups(inventory, alone, ignore_groups=True) == ()
