"""Trees for the authoring tests: the pristine sglang 0.5.13.post1 package extracted from the
real cached wheel, and a copy edited by hand into ddtree 1.0.0's results. Extracted once per
session (about 1 s); tests that edit further work on hard-linked copies (`linked_copy`)."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import fetch_wheel, materialize
from ddtree_deploy.patchset.models import Target
from tests.support import DDTREE_100

TARGET = Target(package="sglang", version="0.5.13.post1")


def linked_copy(src: Path, dest: Path) -> Path:
    """Copy the tree `src` to `dest` with hard links (fast); edit it with `write_file`."""
    shutil.copytree(src, dest, copy_function=os.link)
    return dest


def write_file(path: Path, data: bytes) -> None:
    """Replace `path` with `data` without touching a hard-linked twin."""
    path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture(scope="session")
def wheel() -> Path:
    return fetch_wheel(TARGET)


@pytest.fixture(scope="session")
def pristine_site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the pristine sglang/ of the wheel (as a venv's site-packages)."""
    site = tmp_path_factory.mktemp("pristine")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site, [n for n in zf.namelist() if n.startswith("sglang/")])
    return site


@pytest.fixture(scope="session")
def ddtree_site(pristine_site: Path, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pristine tree with ddtree 1.0.0's changes written by hand (its locked results)."""
    site = linked_copy(pristine_site, tmp_path_factory.mktemp("edited") / "site")
    for item in materialize(load_patchset(DDTREE_100), wheel):
        write_file(site / item.entry.path, item.result)
    return site
