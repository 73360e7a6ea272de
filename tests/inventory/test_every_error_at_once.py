"""An inventory's problems come all at once, each blamed on the table that set the key
([defaults] once, not on every host that inherits it), an unknown key with the nearest
known one; --host takes comma lists and globs as --limit does, an unknown name gets the
nearest host (issue #43, item 9)."""

from __future__ import annotations

import pytest

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory import load_inventory, parse_inventory, select_hosts
from tests.support import run_cli

BAD = """\
[defaults]
usr = "deploy"
port = "twenty-two"

[hosts.gpu1]
adress = "10.0.0.1"

[hosts.gpu2]
address = "10.0.0.2"

[hosts.gpu2.service]
knd = "systemd"
"""


def test_every_problem_at_once_each_blamed_where_it_was_written(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    with pytest.raises(InventoryError) as refused:
        load_inventory(path)
    lines = str(refused.value).splitlines()
    assert lines == [
        f"{path}: host 'gpu1': missing required key 'address'",
        f"{path}: [defaults]: key 'port': Input should be a valid integer, unable to parse "
        "string as an integer",
        f"{path}: [defaults]: unknown key 'usr'; did you mean 'user'?",
        f"{path}: host 'gpu1': unknown key 'adress'; did you mean 'address'?",
        f"{path}: host 'gpu2': unknown key 'service.knd'; did you mean 'kind'?",
    ], lines  # [defaults]' two problems once, though both hosts inherit them


def test_a_host_that_overrides_a_default_is_blamed_for_its_own_value():
    raw = {"defaults": {"port": 22}, "hosts": {"h": {"address": "a", "port": "x"}}}
    with pytest.raises(InventoryError) as refused:
        parse_inventory(raw, "mem")
    assert str(refused.value).startswith("mem: host 'h': key 'port'"), refused.value


def test_unknown_top_level_keys_all_named_with_a_suggestion():
    with pytest.raises(InventoryError) as refused:
        parse_inventory({"host": {}, "grups": {}, "hosts": {"h": {"address": "a"}}}, "mem")
    assert str(refused.value).splitlines() == [
        "mem: unknown top-level key 'grups'; did you mean 'groups'?",
        "mem: unknown top-level key 'host'; did you mean 'hosts'?",
    ]


def test_a_bad_inventory_is_one_exit_2_listing_every_problem(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    done = run_cli("plan", "-i", str(path), "--all")
    assert done.returncode == 2, done.stderr
    assert "unknown key 'usr'" in done.stderr and "unknown key 'service.knd'" in done.stderr


FLEET = {"hosts": {n: {"address": f"10.0.0.{i}"} for i, n in
                   enumerate(["gpu1", "gpu2", "gpu10", "cpu1"], 1)}}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "chosen"),
    [
        (["gpu1,gpu2"], ["gpu1", "gpu2"]),
        (["gpu*"], ["gpu1", "gpu2", "gpu10"]),
        (["gpu?"], ["gpu1", "gpu2"]),
        (["cpu1", "gpu[12]"], ["gpu1", "gpu2", "cpu1"]),  # inventory order
        (["gpu1, gpu1", "gpu*"], ["gpu1", "gpu2", "gpu10"]),
    ],
)
def test_host_takes_comma_lists_and_globs(given, chosen):
    inventory = parse_inventory(FLEET, "mem")
    assert [h.name for h in select_hosts(inventory, names=given)] == chosen


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("gpu3", "mem: unknown host 'gpu3'; did you mean 'gpu2'?"),
        ("tpu*", "mem: --host 'tpu*' matches no host"),
        ("zzzz", "mem: unknown host 'zzzz'"),
    ],
)
def test_an_unknown_host_or_an_empty_glob_is_refused(given, says):
    inventory = parse_inventory(FLEET, "mem")
    with pytest.raises(InventoryError) as refused:
        select_hosts(inventory, names=[given])
    assert str(refused.value) == says
