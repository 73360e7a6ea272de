"""The agent's compiled bundle kept in the user's cache dir (codecache.py), run by the REAL
bootstrap: a second agent runs the cached code; a file or dir others may write, a link or
a damaged file is never run (compiled over instead); a cache that cannot be written costs
nothing but the compile; the oldest bundles are pruned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import codecache
from ddtree_deploy.agent.protocol import bundle
from tests.agent.bare import request_line, run_agent_lines

PLANTED_USER = "from-the-cached-code"


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    """XDG_CACHE_HOME for the agents this test starts (they inherit the environment)."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def facts_user(tmp_path: Path) -> str:
    """The user a fresh bare agent's facts op names (ops_plan._effective_user)."""
    answer = run_agent_lines([request_line(tmp_path / "state", [("facts", {})])])[0]
    assert answer["ok"], answer
    return answer["results"][0]["data"]["user"]


def cache_file(cache_home: Path) -> Path:
    return cache_home / "ddtree-deploy" / "agent" / (codecache.bundle_key(bundle()) + ".code")


def plant(cache_home: Path) -> Path:
    """Write the cache file of this bundle with ops_plan's code changed to name
    PLANTED_USER as the user: the answer then shows which code ran."""
    sources = dict(bundle())
    old = "return pwd.getpwuid(os.geteuid()).pw_name"
    assert old in sources["ddtree_agent.ops_plan"]
    sources["ddtree_agent.ops_plan"] = sources["ddtree_agent.ops_plan"].replace(
        old, f"return {PLANTED_USER!r}"
    )
    path = cache_file(cache_home)
    assert codecache.write_codes(str(path.parent), path.name, codecache.compile_bundle(sources))
    return path


def test_the_first_agent_stores_the_bundle_and_the_next_one_runs_it(tmp_path, cache_home):
    real_user = facts_user(tmp_path)
    stored = cache_file(cache_home)
    assert stored.is_file() and list(stored.parent.iterdir()) == [stored]
    assert stored.stat().st_mode & 0o777 == 0o600 and stored.parent.stat().st_mode & 0o777 == 0o700
    plant(cache_home)
    assert facts_user(tmp_path) == PLANTED_USER != real_user  # the cached code is what ran


@pytest.mark.parametrize("spoil", ["file others may write", "dir others may write", "damaged"])
def test_a_cache_others_could_have_written_or_that_is_damaged_is_not_run(
    tmp_path, cache_home, spoil
):
    path = plant(cache_home)
    if spoil == "file others may write":
        path.chmod(0o666)
    elif spoil == "dir others may write":
        path.parent.chmod(0o777)
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    assert facts_user(tmp_path) != PLANTED_USER  # compiled from the source sent
    if spoil == "damaged":  # ... and written again: the next agent reads the real code
        assert codecache.read_codes(str(path.parent), path.name, bundle()) is not None
        assert facts_user(tmp_path) != PLANTED_USER


def test_a_linked_cache_file_is_not_run(tmp_path, cache_home):
    path = plant(cache_home)
    elsewhere = tmp_path / "elsewhere.code"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    assert facts_user(tmp_path) != PLANTED_USER


def test_a_cache_that_cannot_be_written_only_costs_the_compile(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a dir")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert facts_user(tmp_path)  # answered, from source
    loader = type("Loader", (), {})()
    assert codecache.use_cache(loader, bundle()) == "miss" and set(loader.C) == set(bundle())


def test_another_bundle_or_python_has_another_key_and_the_oldest_are_pruned(tmp_path):
    sources = bundle()
    changed = dict(sources, **{"ddtree_agent.pure": sources["ddtree_agent.pure"] + "\n"})
    assert codecache.bundle_key(changed) != codecache.bundle_key(sources)
    directory = tmp_path / "agent"
    codes = codecache.compile_bundle({"ddtree_agent.pure": sources["ddtree_agent.pure"]})
    names = [f"{i}{codecache.SUFFIX}" for i in range(codecache.KEEP + 2)]
    for age, name in enumerate(reversed(names)):  # names[0] is the newest
        assert codecache.write_codes(str(directory), name, codes)
        os.utime(directory / name, (1_000_000 + age, 1_000_000 + age))
    (directory / "dead.1.tmp").write_bytes(b"")
    os.utime(directory / "dead.1.tmp", (1, 1))
    assert codecache.write_codes(str(directory), "new.code", codes)
    kept = sorted(p.name for p in directory.iterdir())
    assert kept == sorted(["new.code", *names[: codecache.KEEP - 1]])


def test_a_dead_writers_temp_file_goes_even_when_few_bundles_are_kept(tmp_path):
    """Only a temp file older than STALE_TMP_S goes: a live writer's stays."""
    directory = tmp_path / "agent"
    codes = codecache.compile_bundle({"ddtree_agent.pure": bundle()["ddtree_agent.pure"]})
    assert codecache.write_codes(str(directory), "old.code", codes)
    (directory / "dead.1.tmp").write_bytes(b"")
    os.utime(directory / "dead.1.tmp", (1, 1))
    (directory / "live.2.tmp").write_bytes(b"")
    assert codecache.write_codes(str(directory), "new.code", codes)
    kept = sorted(p.name for p in directory.iterdir())
    assert kept == ["live.2.tmp", "new.code", "old.code"]


def test_use_cache_without_a_bundle_is_off():
    assert codecache.use_cache() == "off"  # imported from the source tree: nothing to do


def test_the_oldest_host_python_keeps_its_own_compiled_bundle(cache_home, oldest_host):
    """python 3.8's bytecode differs from this python's: its agent stores and reads a file
    of its own key (and a bundle with a health op runs from it)."""
    for _ in range(2):
        assert oldest_host.call(("facts", {})).ok
    stored = list((cache_home / "ddtree-deploy" / "agent").glob("*.code"))
    assert len(stored) == 1 and stored[0] != cache_file(cache_home)


def test_a_cache_entry_that_cannot_be_read_is_compiled_over(tmp_path, cache_home):
    """A dir where the file should be opens but does not read: the agent still answers."""
    path = cache_file(cache_home)
    path.mkdir(parents=True, mode=0o700)
    path.parent.chmod(0o700)
    assert facts_user(tmp_path) != PLANTED_USER
    loader = type("Loader", (), {})()
    assert codecache.use_cache(loader, bundle()) == "miss" and set(loader.C) == set(bundle())
