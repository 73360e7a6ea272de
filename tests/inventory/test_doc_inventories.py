"""The inventories docs/quickstart.md shows load as shown (the loader's own checks)."""

from __future__ import annotations

import re
import tomllib

import pytest

from ddtree_deploy.errors import InventoryError
from ddtree_deploy.inventory.load import parse_inventory
from tests.support import REPO

QUICKSTART = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")


def toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", QUICKSTART, flags=re.S)


def test_the_quickstart_inventory_loads_with_its_serve_file_and_draft():
    first = toml_blocks()[0]
    inventory = parse_inventory(tomllib.loads(first), "quickstart.md")
    host = inventory.hosts["ct129"]
    assert host.service.kind == "systemd" and host.service.args_file == "/etc/sglang/serve.env"
    assert host.gpus == 8 and host.user == "root"
    assert "--speculative-draft-model-path" in host.serve.args


def test_the_become_variant_loads_over_the_same_defaults():
    first, become = toml_blocks()[:2]
    defaults = first.split("[hosts.ct129]")[0]
    inventory = parse_inventory(tomllib.loads(defaults + become), "quickstart.md")
    host = inventory.hosts["ct129"]
    assert (host.user, host.become, host.become_user) == ("deploy", "sudo", "root")


def test_a_misspelt_key_in_it_is_refused():  # the control: the loader does check these
    broken = toml_blocks()[0].replace("args_file =", "args_flie =")
    with pytest.raises(InventoryError, match="unknown key 'service.args_flie'"):
        parse_inventory(tomllib.loads(broken), "quickstart.md")
