"""[gate] tables: merged patchset < [defaults] < groups < host, resolved against the
built-in defaults; prompts files read and locked; every bad value named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_deploy.errors import InventoryError, PatchsetError
from ddtree_deploy.gate.prompts import parse_prompts
from ddtree_deploy.gate.settings import GateConfig, Thresholds, resolve
from ddtree_deploy.gate.verdict import Action
from ddtree_deploy.inventory.load import load_inventory, parse_inventory
from ddtree_deploy.patchset import check_sources, load_patchset
from ddtree_deploy.stages import prepare_patchset
from ddtree_deploy.stages.gate_plan import plan_gate
from tests.support import REPO, copy_patchset

DDTREE_110 = REPO / "patchsets" / "ddtree" / "1.1.0"


def host_of(raw: dict, name: str = "a", source: str = "inv.toml"):
    return parse_inventory(raw, source).hosts[name]


def test_tables_merge_key_by_key_in_order():
    host = host_of(
        {
            "defaults": {"gate": {"bake_s": 5, "requests": 9}},
            "groups": {"g1": {"gate": {"bake_s": 7}}, "g2": {"gate": {"concurrency": 2}}},
            "hosts": {"a": {"address": "x", "groups": ["g1", "g2"], "gate": {"requests": 3}}},
        }
    )
    patchset = GateConfig(bake_s=1, greedy_match="prefix:8", requests=100)
    merged = host.gate.over(patchset)
    assert merged.model_dump(exclude_none=True) == {
        "bake_s": 7.0, "requests": 3, "concurrency": 2, "greedy_match": "prefix:8",
    }  # fmt: skip


def test_resolve_fills_the_built_in_defaults():
    settings = resolve(GateConfig(bake_s=2), ({"text": "hi"},))
    assert settings.mode == "full" and settings.bake_s == 2 and settings.requests == 32
    assert settings.thresholds == Thresholds()
    assert resolve(GateConfig(), ({"text": "hi"},), "quick").loads is False


def test_inconclusive_needs_a_human_and_no_data_fails_by_default_each_configurable():
    assert (Thresholds().on_inconclusive, Thresholds().on_no_data) == (
        Action.NEEDS_HUMAN,
        Action.FAIL,
    )
    config = GateConfig(on_inconclusive="pass", on_no_data="needs_human")
    thresholds = resolve(config, ({"text": "hi"},)).thresholds
    assert (thresholds.on_inconclusive, thresholds.on_no_data) == (Action.PASS, Action.NEEDS_HUMAN)
    host = host_of({"hosts": {"a": {"address": "x", "gate": {"on_inconclusive": "fail"}}}})
    assert resolve(host.gate, ()).thresholds.on_inconclusive == Action.FAIL


@pytest.mark.parametrize(
    "gate, said",
    [
        ({"greedy_match": "fuzzy"}, "greedy_match 'fuzzy'"),
        ({"metrics": ["sglang:x ~ 1"]}, "metrics rule 'sglang:x ~ 1'"),
        ({"metrics": ["sglang:x{a=b} == 1"]}, "sglang:x{a=b} == 1"),
        ({"max_tokens_per_s_regression": 1.5}, "max_tokens_per_s_regression"),
        ({"mode": "sometimes"}, "gate.mode"),
        ({"bake": 3}, "unknown key 'gate.bake'"),
        ({"concurrency": 0}, "gate.concurrency"),
        ({"on_inconclusive": "shrug"}, "gate.on_inconclusive"),
        ({"on_no_data": "ignore"}, "gate.on_no_data"),
    ],
)
def test_bad_gate_values_name_host_and_key(gate, said):
    with pytest.raises(InventoryError) as err:
        host_of({"hosts": {"a": {"address": "x", "gate": gate}}})
    assert "host 'a'" in str(err.value) and said in str(err.value)


def test_good_metrics_rules_are_accepted():
    rules = [
        "sglang:num_aborted_requests_total == 0",
        'delta(sglang:num_requests_total{model_name="m"}) >= 1',
        "sglang:gen_throughput > 1e-3",
    ]
    assert GateConfig(metrics=rules).metrics == rules


def test_inventory_prompts_are_read_relative_to_the_inventory(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"input_ids": [1, 2]}\n\n{"text": "hello"}\n')
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.a]\naddress = "x"\n[hosts.a.gate]\nprompts = "p.jsonl"\n')
    host = load_inventory(inv).hosts["a"]
    assert host.gate_prompts == ({"input_ids": [1, 2]}, {"text": "hello"})
    assert host.gate.prompts == str(tmp_path / "p.jsonl")


@pytest.mark.parametrize(
    "text, said",
    [
        ("", "no prompts"),
        ("{not json\n", "p.jsonl:1: not JSON"),
        ('{"input_ids": []}\n', "p.jsonl:1: input_ids must be a non-empty list"),
        ('{"text": "a"}\n{"input_ids": [1], "text": "b"}\n', "p.jsonl:2: expected an object"),
        ('{"input_ids": [-1]}\n', "ints >= 0"),
    ],
)
def test_bad_prompts_files_name_file_and_line(tmp_path, text, said):
    (tmp_path / "p.jsonl").write_text(text)
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.a]\naddress = "x"\n[hosts.a.gate]\nprompts = "p.jsonl"\n')
    with pytest.raises(InventoryError) as err:
        load_inventory(inv)
    assert "host 'a': key 'gate.prompts'" in str(err.value) and said in str(err.value)


def test_missing_prompts_file_is_named(tmp_path):
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.a]\naddress = "x"\n[hosts.a.gate]\nprompts = "nope.jsonl"\n')
    with pytest.raises(InventoryError, match="nope.jsonl: cannot read the gate prompts"):
        load_inventory(inv)


def test_parse_prompts_keeps_order():
    assert parse_prompts('{"text": "a"}\n{"text": "b"}', "x") == ({"text": "a"}, {"text": "b"})


def with_gate(tmp_path: Path, gate_toml: str, prompts: str | None) -> Path:
    """A copy of ddtree 1.1.0 with a [gate] table (and its prompts file), relocked only in
    its references (the code's lock is unchanged: no wheel needed)."""
    root = tmp_path / "ddtree" / "1.1.0"
    copy_patchset(DDTREE_110, root)
    spec = root / "patchset.toml"
    spec.write_text(spec.read_text() + "\n[gate]\n" + gate_toml)
    if prompts is not None:
        (root / "gate").mkdir()
        (root / "gate" / "prompts.jsonl").write_text(prompts)
    return root


def relock_references(root: Path, references: bool = True) -> None:
    """Add the data files' sha256 and the edited patchset.toml to the lock, as `patchset
    lock --force` would."""
    from ddtree_deploy.patchset.lock import digest_references
    from ddtree_deploy.patchset.spec_lock import lockable_spec, spec_digest

    lock_path = root / "patchset.lock.json"
    lock = json.loads(lock_path.read_text())
    patchset = load_patchset(root)
    if references:
        lock["references"] = digest_references(patchset)
    lock["spec"] = lockable_spec(patchset.spec_data)
    lock["spec_sha256"] = spec_digest(lock["spec"])
    lock_path.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")


def test_patchset_prompts_are_locked_like_the_references(tmp_path):
    root = with_gate(tmp_path, 'prompts = "gate/prompts.jsonl"\nbake_s = 4\n', '{"text": "a"}\n')
    with pytest.raises(PatchsetError, match=r"patchset.toml: differs from its lock: \[gate\]"):
        check_sources(load_patchset(root))
    relock_references(root, references=False)  # the new [gate] recorded, not its data
    with pytest.raises(PatchsetError, match="gate/prompts.jsonl: gate prompts not in the lock"):
        check_sources(load_patchset(root))
    relock_references(root)
    prepared = prepare_patchset(load_patchset(root))
    assert prepared.gate_prompts == ({"text": "a"},) and prepared.gate.bake_s == 4
    (root / "gate" / "prompts.jsonl").write_text('{"text": "b"}\n')
    with pytest.raises(PatchsetError, match="gate prompts changed since the lock"):
        check_sources(load_patchset(root))


def test_patchset_gate_prompts_path_must_stay_inside(tmp_path):
    root = with_gate(tmp_path, 'prompts = "../x.jsonl"\n', None)
    with pytest.raises(PatchsetError, match="gate.prompts"):
        load_patchset(root)


def test_without_a_prompts_file_the_lossless_prompts_are_replayed():
    prepared = prepare_patchset(load_patchset(DDTREE_110))
    assert prepared.gate is None and len(prepared.gate_prompts) == 8
    host = host_of({"hosts": {"a": {"address": "x", "gate": {"mode": "quick"}}}})
    settings = plan_gate(host, prepared, None)
    assert settings is not None and settings.prompts == prepared.gate_prompts
    assert plan_gate(host, prepared, "off") is None


def test_no_table_and_no_flag_means_no_gate():
    prepared = prepare_patchset(load_patchset(DDTREE_110))
    host = host_of({"hosts": {"a": {"address": "x"}}})
    assert plan_gate(host, prepared, None) is None
    assert plan_gate(host, prepared, "quick") is not None  # --gate quick turns it on
