"""docs/inventory.md is generated from the inventory models; these tests fail when it is stale."""

from __future__ import annotations

import pytest
from pydantic import Field

from ddtree_deploy.devtools import inventory_doc
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import Strict


def test_docs_inventory_md_matches_the_models():
    written = inventory_doc.DOC_PATH.read_text(encoding="utf-8")
    assert written == inventory_doc.render_inventory_doc(), (
        f"docs/inventory.md is stale: run `{inventory_doc.FIX_COMMAND}` and commit it"
    )


def test_every_host_key_has_a_row_with_its_description():
    page = inventory_doc.render_inventory_doc()
    for name, field in Host.model_fields.items():
        if name in inventory_doc.LOADER_FIELDS:
            assert f"| `{name}` |" not in page.split("## `[hosts.NAME.service]`")[0]
            continue
        assert field.description and f"| `{name}` |" in page, name
        assert inventory_doc._cell(field.description) in page, name


def test_a_field_without_a_description_is_refused():
    class Bare(Strict):
        """A model with one undocumented key."""

        documented: int = Field(default=1, description="Has one.")
        bare: int = 2

    with pytest.raises(ValueError, match="Bare.bare has no description="):
        inventory_doc._section("Bare", Bare)


def test_check_exits_1_on_a_stale_page_and_names_the_fix(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "inventory.md"
    stale.write_text("# Inventory keys\n(old)\n", encoding="utf-8")
    monkeypatch.setattr(inventory_doc, "DOC_PATH", stale)
    assert inventory_doc.main(["--check"]) == 1
    assert inventory_doc.FIX_COMMAND in capsys.readouterr().err
    assert inventory_doc.main([]) == 0  # regenerates it
    assert inventory_doc.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == inventory_doc.render_inventory_doc()


def test_gate_defaults_are_the_resolved_settings():
    page = inventory_doc.render_inventory_doc()
    assert "| `bake_s` | float?, ≥ 0 | `30.0` |" in page
    assert '| `greedy_match` | str? | `"exact"` |' in page
