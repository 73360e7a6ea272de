"""The serving-gate fixtures (and broken.py's variants) build from the real ddtree 1.1.0 and
pass the local gate; no server. What they do to a real server is measured on sandbox hosts."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import check_sources, load_patchset, read_source, verify_patchset
from ddtree_sandbox import gate_fixtures
from ddtree_sandbox.broken import VARIANTS, build_broken_patchset, copy_with_edits
from ddtree_sandbox.gate_fixtures import GATE_VARIANTS, build_gate_patchset, drop_lossless
from tests.support import REPO

DDTREE_110 = REPO / "patchsets" / "ddtree" / "1.1.0"


def original_bytes(rel: str) -> bytes | None:
    """1.1.0's bytes of the file at ``rel`` (its own file, or a shared source's blob)."""
    if (DDTREE_110 / rel).is_file():
        return (DDTREE_110 / rel).read_bytes()
    ddtree_110 = load_patchset(DDTREE_110)
    for entry in ddtree_110.spec.files:
        if entry.source == rel:
            return read_source(ddtree_110, entry)
    return None


def changed_files(root: Path) -> set[str]:
    """Files (relative paths) of ``root`` that differ from or are missing in 1.1.0 (a
    self-contained copy holds 1.1.0's shared sources as its own files: those are unchanged)."""
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file()
        and path.name != "patchset.lock.json"
        and original_bytes(str(path.relative_to(root))) != path.read_bytes()
    }


@pytest.mark.parametrize("variant", sorted(GATE_VARIANTS))
def test_every_gate_fixture_builds_from_110_and_passes_the_local_gate(tmp_path, variant):
    fixture = GATE_VARIANTS[variant]
    for rel, old, _ in fixture.edits:  # each text it changes is in 1.1.0 exactly once
        assert (original_bytes(rel) or b"").decode().count(old) == 1, (variant, old)

    ref = build_gate_patchset(DDTREE_110, tmp_path, variant)

    assert ref == f"ddtree@{fixture.version}"
    patchset = load_patchset(tmp_path / "ddtree" / fixture.version)
    assert patchset.spec.version == fixture.version
    check_sources(patchset)  # push's local gate
    verify_patchset(patchset)  # `patchset verify`: re-materialised from the wheel, compiled
    edited = {rel for rel, _, _ in fixture.edits}
    prompts = {"gate/prompts.jsonl"} if fixture.drop_lossless else set()
    assert changed_files(patchset.root) == edited | {"patchset.toml"} | prompts
    assert patchset.spec.serve == load_patchset(DDTREE_110).spec.serve


def test_the_fixture_versions_are_unused_and_distinct():
    broken = {bug.version for bug in VARIANTS.values()}
    gate = [fixture.version for fixture in GATE_VARIANTS.values()]
    assert len(set(gate)) == len(gate)
    assert not broken & set(gate)
    assert not any((REPO / "patchsets" / "ddtree" / v).exists() for v in broken | set(gate))


def test_greedy_has_the_mask_bug_and_nothing_the_push_compares_outputs_with(tmp_path):
    build_gate_patchset(DDTREE_110, tmp_path, "greedy")
    root = tmp_path / "ddtree" / GATE_VARIANTS["greedy"].version
    patchset = load_patchset(root)
    assert patchset.spec.lossless is None
    # its prompts are the gate's own now, locked like the references were
    assert patchset.require_lock().references.keys() == {"gate/prompts.jsonl"}
    assert patchset.spec.gate is not None and patchset.spec.gate.prompts == "gate/prompts.jsonl"
    assert len((root / "gate" / "prompts.jsonl").read_text().splitlines()) == 8
    assert not (root / "reference").exists()
    assert "[smoke]" in (root / "patchset.toml").read_text()
    mask = VARIANTS["mask"]
    assert mask.new in (root / mask.rel).read_text()


def test_drop_lossless_refuses_a_spec_without_a_last_lossless_table(tmp_path):
    spec = tmp_path / "patchset.toml"
    spec.write_text('name = "x"\n')
    with pytest.raises(ValueError, match="no single last"):
        drop_lossless(spec, "greedy")
    spec.write_text('[lossless]\nmax_new_tokens = 1\n\n[serve]\nargs = ["--x"]\n')
    with pytest.raises(ValueError, match="no single last"):
        drop_lossless(spec, "greedy")


def test_an_edit_that_no_longer_matches_is_refused(tmp_path):
    edits = [(GATE_VARIANTS["clamp"].edits[0][0], "no such text", "x")]
    with pytest.raises(ValueError, match="not there once"):
        copy_with_edits(DDTREE_110, tmp_path, "1.1.99", edits, "clamp")


def test_a_fixture_edited_after_its_lock_fails_the_local_gate(tmp_path):
    build_gate_patchset(DDTREE_110, tmp_path, "slow")
    root = tmp_path / "ddtree" / GATE_VARIANTS["slow"].version
    target = root / GATE_VARIANTS["slow"].edits[0][0]
    slowed = target.read_text()
    assert slowed.count(f"{gate_fixtures.SLOW_FACTOR} * gap") == 1
    target.write_text(slowed.replace(f"{gate_fixtures.SLOW_FACTOR} * gap", "20.0 * gap"))
    with pytest.raises(PatchsetError, match="changed since the lock"):
        check_sources(load_patchset(root))


class Blocked(Exception):
    """Raised by the fake time.sleep: the scheduler would block here."""


def load_hang_helper(monkeypatch, hang_after: str | None) -> Any:
    """The `hang` fixture's helper, run with a time.sleep that raises Blocked."""
    if hang_after is None:
        monkeypatch.delenv(gate_fixtures.HANG_AFTER_ENV, raising=False)
    else:
        monkeypatch.setenv(gate_fixtures.HANG_AFTER_ENV, hang_after)

    def sleep(seconds: float) -> None:
        raise Blocked(seconds)

    import os

    namespace = {"Any": Any, "os": os, "time": SimpleNamespace(sleep=sleep)}
    namespace["logger"] = logging.getLogger("test_gate_fixtures")
    exec(gate_fixtures._HANG_HELPER, namespace)
    return namespace["_gate_fixture_hang"]


def reqs(*rids: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(rid=rid) for rid in rids]


def test_hang_serves_n_distinct_requests_then_blocks(monkeypatch):
    hang = load_hang_helper(monkeypatch, None)
    for i in range(gate_fixtures.HANG_AFTER_DEFAULT):  # a request verifies many steps
        hang(reqs(f"r{i}", f"r{i}", *(f"r{j}" for j in range(i))))
    with pytest.raises(Blocked):
        hang(reqs("one more"))


def test_hang_after_is_read_from_the_environment(monkeypatch):
    hang = load_hang_helper(monkeypatch, "2")
    hang(reqs("a", "b"))
    hang(reqs("a"))
    with pytest.raises(Blocked):
        hang(reqs("a", "c"))


class Clock:
    """A fake time module: monotonic() reads `now`; sleep() records and advances it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_slow_sleeps_a_multiple_of_the_step_before_it_whatever_the_machine():
    """The slowdown is a ratio, not a constant: a 10 ms step and a 60 ms step (a slower CI
    runner) both become about 3x longer under ``slow`` (10x under ``crawl``); idle time
    before a request is capped."""
    fixtures = {
        "slow": (gate_fixtures.SLOW_FACTOR, gate_fixtures.SLOW_MIN_S, gate_fixtures.SLOW_MAX_S),
        "crawl": gate_fixtures.CRAWL,
    }
    for factor, least_s, most_s in fixtures.values():
        clock = Clock()
        namespace: dict[str, Any] = {"time": clock}
        exec(gate_fixtures._slow_helper(factor, least_s, most_s), namespace)
        slow = namespace["_gate_fixture_slow"]
        slow()  # the first verify after start: capped
        assert clock.slept == [most_s]
        for step_s in (0.01, 0.03, 0.06, 0.001):
            clock.slept.clear()
            clock.now += step_s  # draft + target forward
            slow()
            expected = min(most_s, max(least_s, factor * step_s))
            assert clock.slept == [pytest.approx(expected)]
    assert gate_fixtures.SLOW_FACTOR == 2.0
    assert gate_fixtures.CRAWL[0] >= 4 * gate_fixtures.SLOW_FACTOR  # far past any noise band


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_broken_variant_still_builds_and_passes_the_local_gate(tmp_path, variant):
    ref = build_broken_patchset(DDTREE_110, tmp_path, variant)
    bug = VARIANTS[variant]
    assert ref == f"ddtree@{bug.version}"
    patchset = load_patchset(tmp_path / "ddtree" / bug.version)
    verify_patchset(patchset)
    assert changed_files(patchset.root) == {bug.rel, "patchset.toml"}
