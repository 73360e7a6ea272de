"""The agent's find_distribution reads a `.dist-info` directly (no importlib.metadata import on
a preflight) and must pick what importlib.metadata picks: the same directory, version and
files, for every distribution installed here; where the fast path cannot be sure (an
`.egg-info`, a zip on sys.path) it hands over to importlib.metadata itself."""

from __future__ import annotations

import importlib.metadata as md
import sys
import zipfile
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import state
from ddtree_deploy.agent.host.state import DistInfo, find_distribution


def names_installed_here() -> list[str]:
    names = {dist.metadata["Name"] for dist in md.distributions() if dist.metadata["Name"]}
    return sorted(names)


def test_every_distribution_here_reads_as_importlib_metadata_reads_it():
    names = names_installed_here()
    assert len(names) > 20  # the probe did see this environment's packages
    fast = 0
    for name in names:
        ours, theirs = find_distribution(name), md.distribution(name)
        assert ours is not None, name
        assert ours.version == theirs.version, name
        assert str(ours.locate_file("")) == str(theirs.locate_file("")), name
        assert ours.read_text("RECORD") == theirs.read_text("RECORD"), name
        fast += isinstance(ours, DistInfo)
    assert fast > 20  # the fast path answered for (nearly) all of them


@pytest.mark.parametrize(
    "spelling", ["Typing_Extensions", "typing-extensions", "typing.extensions"]
)
def test_names_match_with_case_and_separators_folded(spelling):
    assert find_distribution(spelling).version == md.version("typing_extensions")


def _dist(where: Path, dirname: str, version: str) -> None:
    info = where / dirname
    info.mkdir(parents=True)
    meta = "METADATA" if dirname.endswith(".dist-info") else "PKG-INFO"
    (info / meta).write_text(f"Metadata-Version: 2.1\nName: fakedist\nVersion: {version}\n\nbody\n")


def test_the_first_path_entry_wins_and_unknown_names_are_none(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    _dist(first, "fakedist-2.0.dist-info", "2.0")
    _dist(second, "fakedist-1.0.dist-info", "1.0")
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    ours = find_distribution("fakedist")
    assert isinstance(ours, DistInfo) and ours.version == "2.0" == md.version("fakedist")
    assert ours.locate_file("") == str(first)
    assert find_distribution("no-such-dist-anywhere") is None


def test_an_egg_info_goes_to_importlib_metadata(tmp_path, monkeypatch):
    _dist(tmp_path, "fakedist-3.0.egg-info", "3.0")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    ours = find_distribution("fakedist")
    assert not isinstance(ours, DistInfo) and ours.version == "3.0"


def test_a_zip_on_sys_path_goes_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("fakedist-4.0.dist-info/METADATA", "Name: fakedist\nVersion: 4.0\n")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    assert state._dist_info_dir("fakedist") is None  # the fast path does not guess
    assert find_distribution("fakedist").version == "4.0"  # importlib.metadata reads the zip


def test_an_egg_in_an_earlier_path_entry_goes_to_importlib_metadata(tmp_path, monkeypatch):
    eggs, later = tmp_path / "eggs", tmp_path / "later"
    (eggs / "fakedist-5.0-py3.11.egg").mkdir(parents=True)
    _dist(later, "fakedist-1.0.dist-info", "1.0")
    monkeypatch.setattr(sys, "path", [str(eggs), str(later), *sys.path])
    assert state._dist_info_dir("fakedist") is None  # not the later dist-info
