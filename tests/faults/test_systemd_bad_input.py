"""Bad systemd input: a `unit` that is no unit name is refused when the inventory is read
(exit 2, file, host and key named, no host contacted): it is an argument of systemctl and
journalctl, so `-x` would be an option and `a; b` is no unit. On a real systemd host
(a container with systemd 252 as PID 1), a unit name that the host does not know is
refused at preflight (exit 2), naming the unit: nothing installed, no journal line (it
used to be installed, then both restarts failed: exit 3, needs attention)."""

from __future__ import annotations

import pytest

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory import load_inventory, parse_inventory
from tests.support import make_patchset, run_cli

SERVICE = '[hosts.gpu7.service]\nkind = "systemd"\nhealth_url = "http://127.0.0.1:1/h"\n'


@pytest.mark.parametrize(
    "unit", ["-x", "--root=/tmp", "sglang.service; reboot", "a b", "../x", "$(id)", "", "u" * 256]
)
def test_a_bad_unit_name_is_refused_naming_file_host_and_key(tmp_path, unit):
    inventory = tmp_path / "bad.toml"
    inventory.write_text(f'[hosts.gpu7]\naddress = "10.0.0.7"\n{SERVICE}unit = "{unit}"\n')
    with pytest.raises(InventoryError) as refused:
        load_inventory(inventory)
    assert f"{inventory}: host 'gpu7': key 'service.unit'" in str(refused.value)
    assert "must be a systemd unit name" in str(refused.value)


def test_good_unit_names_load():
    for unit in ("sglang", "sglang.service", "sglang@0.service", "a:b_c-d.e", "x\\x2dy.service"):
        raw = {"hosts": {"h": {"address": "a", "service": {"kind": "systemd", "unit": unit}}}}
        assert parse_inventory(raw, "mem").hosts["h"].service.unit == unit


def test_a_bad_unit_is_exit_2_before_any_host_is_contacted(tmp_path):
    inventory = tmp_path / "bad.toml"  # the address would not answer: nothing is contacted
    inventory.write_text(f'[hosts.gpu7]\naddress = "192.0.2.7"\n{SERVICE}unit = "-x"\n')
    done = run_cli("push", "-i", str(inventory), "--all")
    assert done.returncode == 2, done.stderr
    assert f"error: {inventory}: host 'gpu7': key 'service.unit'" in done.stderr


@pytest.mark.hosts
@pytest.mark.slow
def test_a_unit_the_host_does_not_know_changes_nothing(sandbox_factory, tmp_path):
    sandbox = sandbox_factory(1, service_kind="systemd")
    host = sandbox.hosts[0]
    text = sandbox.inventory_path.read_text()
    assert 'unit = "sglang.service"' in text, text
    sandbox.inventory_path.write_text(text.replace('unit = "sglang.service"', 'unit = "nosuch"'))
    before = host.tree_digest()
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    argv = ["-i", str(sandbox.inventory_path), "--patchsets-dir", str(patchsets)]
    done = run_cli("push", "-H", host.name, *argv, timeout=300)
    # Without the preflight check (before): installed, the restart and the rollback's restart
    # failed ("systemctl stop nosuch exited 5"), exit 3 needs_attention.
    assert done.returncode == 2, done.stderr[-3000:]
    assert "systemd unit nosuch not found on the host" in done.stderr, done.stderr[-3000:]
    assert "install" not in done.stderr and host.tree_digest() == before
    assert not (host.state_dir_on_disk / "journal.jsonl").exists()
