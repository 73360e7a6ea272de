"""The smoke suites come from the package data ddtree_deploy/smoke/, helpers beside them."""

from __future__ import annotations

import pytest

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources
from tests.support import SMOKE_DIR


def test_suites_travel_with_every_helper_and_without_the_package_init(monkeypatch):
    monkeypatch.delenv("DDTREE_DEPLOY_SMOKE_DIR", raising=False)
    sources = load_smoke_sources(["gpu", "imports"], default_smoke_dir())
    assert list(sources) == [
        "_forked_imports.py",
        "_http.py",
        "_kernel_checks.py",
        "_kernel_plan.py",
        "_kernel_suite.py",
        "_kernel_timings.py",
        "_lossless.py",
        "_reference_choice.py",
        "_sglang_kernels.py",
        "_step_checks.py",
        "_suite.py",
        "_toy_decode.py",
        "_tree_ops.py",
        "_uno_mapping.py",
        "gpu",
        "imports",
    ]
    assert sources["_suite.py"] == (SMOKE_DIR / "_suite.py").read_text()


def test_the_env_names_another_suite_dir(tmp_path, monkeypatch):
    (tmp_path / "_helper.py").write_text("X = 1\n")
    (tmp_path / "mine.py").write_text("import _helper\n")
    monkeypatch.setenv("DDTREE_DEPLOY_SMOKE_DIR", str(tmp_path))
    sources = load_smoke_sources(["mine"], default_smoke_dir())
    assert sources == {"_helper.py": "X = 1\n", "mine": "import _helper\n"}


@pytest.mark.parametrize("name", ["nope", "__init__", "_suite", "../gpu"])
def test_an_unknown_suite_is_refused_naming_the_known_ones(name):
    with pytest.raises(ConfigError, match=r"unknown smoke suite .*known: \['compile', 'ddtree'"):
        load_smoke_sources([name], SMOKE_DIR)
