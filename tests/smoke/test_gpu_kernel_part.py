"""The `gpu` suite's kernel part is chosen for sglang 0.5.23 only (_kernel_plan.py, stdlib),
and on a 0.5.23 install whose kernels do not import it fails instead of passing unchecked.
The kernels themselves are proved on the CPU by tests/kernels (marker `kernels`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support import load_smoke_script

PLAN = load_smoke_script("_kernel_plan", "_kernel_plan.py")


@pytest.mark.parametrize(
    ("version", "has_uno", "run"),
    [
        ("0.5.23", True, True),
        ("0.5.23+cu129", True, True),
        ("0.5.23", False, False),  # not 0.5.23's tree kernels after all
        ("0.5.13.post1", False, False),
        ("0.5.13.post1", True, False),
        ("0.5.24", True, False),  # another version's kernels may take other arguments
        ("0.5.2", True, False),
        ("", True, False),
    ],
)
def test_kernel_checks_are_chosen_for_0_5_23_with_its_uno_builder_only(version, has_uno, run):
    chosen, why = PLAN.kernel_checks_apply(version, has_uno)
    assert chosen is run and version in why


def test_every_record_fails_unless_its_control_was_caught():
    assert PLAN.record("c", 0.0, True, True, 1)["ok"] is True
    assert PLAN.record("c", 0.0, True, False, 1)["ok"] is False  # control missed
    assert PLAN.record("c", 0.0, False, True, 1)["ok"] is False


def fake_sglang(root: Path, version: str) -> None:
    """Write an `sglang` package (version, UNO builder file; no kernels that import)."""
    package = root / "sglang"
    (package / "kernels/ops/speculative").mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (package / PLAN.UNO_TREE).write_text("raise ImportError('not this one')\n")


@pytest.fixture
def no_sglang_imported():
    """Hide any imported sglang during the test; drop the one the test imported after it."""
    saved = {m: sys.modules.pop(m) for m in list(sys.modules) if m.split(".")[0] == "sglang"}
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "sglang"]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.mark.parametrize(("version", "checks"), [("0.5.23", ["kernel_import"]), ("0.5.24", [])])
def test_the_suite_runs_the_kernel_part_on_0_5_23_and_a_broken_import_fails(
    tmp_path, monkeypatch, no_sglang_imported, version, checks
):
    fake_sglang(tmp_path, version)
    monkeypatch.syspath_prepend(str(tmp_path))
    suite_mod = load_smoke_script("_suite", "_suite.py")
    part = load_smoke_script("_kernel_suite", "_kernel_suite.py")
    suite = suite_mod.Suite("gpu", request={})
    part.run_kernel_checks(suite, utils=None)
    assert [c["name"] for c in suite.checks] == checks
    assert not any(c["passed"] for c in suite.checks)
    if checks:
        assert "Error" in suite.checks[0]["detail"].splitlines()[0], suite.checks[0]


def test_a_kernel_step_fails_when_any_of_its_records_is_not_ok():
    part = load_smoke_script("_kernel_suite", "_kernel_suite.py")
    caught = PLAN.record("verify_greedy", 0.0, True, True, 3, accept_lengths=[1, 2])
    missed = PLAN.record("verify_greedy", 0.0, True, False, 3)
    ok, detail = part._verdict([caught])
    assert ok and '"accept_lengths": [1, 2]' in detail and '"check"' not in detail
    assert part._verdict([missed])[0] is False
    timings = [{"check": "uno_vs_ours", "ok": True}, {"check": "masked_verify", "ok": True}]
    assert part._verdict(timings) == (True, json.dumps(timings))
    assert part._verdict([*timings, {"check": "uno_vs_ours", "ok": False}])[0] is False
