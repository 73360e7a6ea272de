"""Fixtures of the CLI tests: `temp_host` (tests/cli/temp_host.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import FakeHost
from tests.cli.temp_host import start_temp_host


@pytest.fixture
def temp_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    """A temp-dir host whose real agent runs through the local transport."""
    yield from start_temp_host(tmp_path, monkeypatch)
