"""A local command that needs a pristine target wheel the cache lacks says on stderr what it
downloads and into which folder first; the cache is $DDTREE_DEPLOY_CACHE/wheels. A cached
wheel is not mentioned (the control), nor is a download under -q."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.cli.context import RunContext, SharedOptions
from ddtree_deploy.cli.wheels import fetch_wheels
from ddtree_deploy.patchset.materialize import fetch_wheel
from ddtree_deploy.patchset.models import Target
from tests.support import REPO

TARGET = Target(package="sglang", version="0.5.13.post1")


def said(quiet: bool = False) -> tuple[RunContext, io.StringIO]:
    stream = io.StringIO()
    console = Console(file=stream, width=400, color_system=None)
    return RunContext(console, SharedOptions(quiet=quiet)), stream


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DDTREE_DEPLOY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_download(target: Target) -> Path:
    """What fetch_wheel leaves behind, without pip: an (empty) wheel in the cache."""
    from ddtree_deploy.patchset.materialize import wheels_dir

    wheels_dir().mkdir(parents=True, exist_ok=True)
    path = wheels_dir() / f"{target.package}-{target.version}-py3-none-any.whl"
    path.write_bytes(b"")
    return path


def test_a_download_is_announced_once_with_its_folder(cache, monkeypatch):
    monkeypatch.setattr("ddtree_deploy.cli.wheels.fetch_wheel", fake_download)
    run, stream = said()
    fetch_wheels(run, TARGET, TARGET)
    text = stream.getvalue()
    assert text.count("downloading sglang==0.5.13.post1") == 1
    assert f"into {cache / 'wheels'}" in text and "$DDTREE_DEPLOY_CACHE" in text
    run, stream = said()
    fetch_wheels(run, TARGET)  # control: now cached, nothing to say
    assert stream.getvalue() == ""


def test_quiet_downloads_without_a_word(cache, monkeypatch):
    monkeypatch.setattr("ddtree_deploy.cli.wheels.fetch_wheel", fake_download)
    run, stream = said(quiet=True)
    fetch_wheels(run, TARGET)
    assert stream.getvalue() == "" and list((cache / "wheels").iterdir())


def test_verify_downloads_into_the_cache_the_env_names(tmp_path, monkeypatch):
    """The real `pip download`, from a find-links folder holding the real wheel (no index)."""
    real = fetch_wheel(TARGET)  # the user's cache, before the env points elsewhere
    links = tmp_path / "links"
    links.mkdir()
    (links / real.name).symlink_to(real)
    for key, value in {
        "DDTREE_DEPLOY_CACHE": str(tmp_path / "cache"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }.items():
        monkeypatch.setenv(key, value)
    args = ["patchset", "verify", "ddtree@1.0.0", "--patchsets-dir", str(REPO / "patchsets")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "downloading sglang==0.5.13.post1" in first.stderr
    assert f"into {tmp_path / 'cache' / 'wheels'}" in first.stderr
    assert [p.name for p in (tmp_path / "cache" / "wheels").iterdir()] == [real.name]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "downloading" not in again.stderr
