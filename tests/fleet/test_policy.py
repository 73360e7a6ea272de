"""Rollout policy from data: wave plans, max-fail, shards, option parsing; no hosts, no I/O."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.fleet import (
    Count,
    Wave,
    max_fail_exceeded,
    parse_batches,
    parse_count,
    parse_shard,
    plan_waves,
    shard_items,
    stop_reason,
)

FIXTURES = Path(__file__).with_name("fixtures")


def load(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("case", load("waves.json"), ids=lambda c: c["id"])
def test_plan_waves(case):
    names = [f"h{i}" for i in range(case["hosts"])]
    batches = parse_batches(case["batch"]) if case["batch"] else ()
    waves = plan_waves(names, case["canary"], batches)
    assert [[int(n[1:]) for n in w.hosts] for w in waves] == case["waves"]
    assert [w.index for w in waves] == list(range(len(waves)))
    assert bool(waves and waves[0].canary) == case["canary_wave"]
    assert not any(w.canary for w in waves[1:])
    planned = [n for w in waves for n in w.hosts]
    assert planned == names  # every host exactly once, order kept


@pytest.mark.parametrize("case", load("max_fail.json"), ids=lambda c: json.dumps(c))
def test_max_fail_exceeded(case):
    limit = parse_count(case["max_fail"]) if case["max_fail"] is not None else None
    assert max_fail_exceeded(case["failed"], case["total"], limit) is case["exceeded"]


@pytest.mark.parametrize("case", load("shards.json"), ids=lambda c: f"{c['hosts']}:{c['shard']}")
def test_shard_items(case):
    items = list(range(case["hosts"]))
    assert shard_items(items, *parse_shard(case["shard"])) == case["picked"]


def test_shards_partition_the_selection():
    items = list(range(23))
    for total in range(1, 8):
        shards = [shard_items(items, i, total) for i in range(1, total + 1)]
        assert sorted(x for s in shards for x in s) == items
        assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_stop_reason_canary_stops_on_any_failure_whatever_max_fail():
    canary = Wave(0, ("h0",), canary=True)
    wave = Wave(1, ("h1", "h2"))
    assert stop_reason(canary, 1, 1, 10, Count(50, percent=True)) == "canary failed on 1 host(s)"
    assert stop_reason(canary, 0, 0, 10, None) is None
    assert stop_reason(wave, 1, 1, 10, None) is None
    assert "max-fail 0" in stop_reason(wave, 1, 1, 10, Count(0))


@pytest.mark.parametrize(
    "text,expected",
    [("3", Count(3)), (" 25% ", Count(25, True)), ("0", Count(0)), ("100%", Count(100, True))],
)
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["", "x", "-1", "2.5", "101%", "%", "5%%"])
def test_parse_count_rejects(text):
    with pytest.raises(ConfigError):
        parse_count(text)


@pytest.mark.parametrize("text", ["0", "1,0", ",", "a,b"])
def test_parse_batches_rejects(text):
    with pytest.raises(ConfigError):
        parse_batches(text)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "1/0", "a/b", "1/2/3"])
def test_parse_shard_rejects(text):
    with pytest.raises(ConfigError):
        parse_shard(text)
