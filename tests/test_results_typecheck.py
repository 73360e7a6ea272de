"""mypy checks what report/ reads from a host result: a misspelled `details` key in a
reader, or a value of the wrong type in a writer, fails `make lint`.

`HostResult.details` is the `HostDetails` TypedDict (results.py), and pyproject's mypy
plugin (devtools/mypy_keys.py) makes `.get("key")` name one of its keys, as `["key"]`
must. Proven on a copy of a real reader, report/summary.py, checked with the project's own
mypy config: the copy as it is passes (the control); with one key misspelled it fails,
naming that line. A tiny writer with a string where a number belongs fails too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mypy import api

from ddtree_deploy.report import summary

ROOT = Path(__file__).resolve().parents[1]
READER = Path(summary.__file__)
ANCHOR = 'plain(r.details.get("wave") or "-"),'
MISSPELLED = 'plain(r.details.get("wvae") or "-"),'
WRONG_WRITER = """from ddtree_deploy.results import HostResult, Outcome

RESULT = HostResult("h1", Outcome.OK, details={"duration_s": "1.5s"})
"""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every run, seeded from the checkout's when `make lint` left one
    (from scratch, mypy reads rich and pydantic first: minutes on a small machine). mypy
    rechecks whatever changed since, so the seed only saves time."""
    cache = tmp_path_factory.mktemp("mypy") / "cache"
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", cache)
    return cache


def run_mypy(module: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """Return (mypy's report, exit status) for `module`, which imports the package from
    this checkout, under pyproject's config (its plugins included)."""
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    config = str(ROOT / "pyproject.toml")
    argv = ["--config-file", config, "--cache-dir", str(cache_dir), "--no-error-summary"]
    stdout, stderr, status = api.run([*argv, str(module)])
    return stdout + stderr, status


def copy_reader(tmp_path: Path, old: str = ANCHOR, new: str = ANCHOR) -> tuple[Path, int]:
    """Write report/summary.py to tmp_path with `old` replaced by `new`; return the copy
    and the number of the line changed."""
    source = READER.read_text()
    assert source.count(old) == 1, "the anchor moved: pick another line in " + READER.name
    copy = tmp_path / "summary_copy.py"
    copy.write_text(source.replace(old, new))
    return copy, source[: source.index(old)].count("\n") + 1


def test_the_reader_as_it_is_passes(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy, _ = copy_reader(tmp_path)
    report, status = run_mypy(copy, cache_dir, monkeypatch)
    assert status == 0, report


def test_a_misspelled_details_key_in_a_reader_fails_mypy(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy, line = copy_reader(tmp_path, ANCHOR, MISSPELLED)
    report, status = run_mypy(copy, cache_dir, monkeypatch)
    assert status == 1, report
    assert f'summary_copy.py:{line}: error: TypedDict "HostDetails" has no key "wvae"' in report


def test_a_details_value_of_the_wrong_type_fails_mypy(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = tmp_path / "writer.py"
    writer.write_text(WRONG_WRITER)
    report, status = run_mypy(writer, cache_dir, monkeypatch)
    assert status == 1, report
    wrong = 'expression has type "str", TypedDict item "duration_s" has type "float"'
    assert f"writer.py:3: error: Incompatible types ({wrong})" in report, report
