"""Packages whose re-exports load on first use (`ddtree_deploy.lazy`): the table a package
gives `lazy_exports` names exactly what its `if TYPE_CHECKING:` block imports (what type
checkers see), each name resolves to its home module's object, and importing the package
loads none of them (each alone: packages may load one another's)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAZY = {
    "ddtree_deploy.agent": "ddtree_deploy.agent.protocol",
    "ddtree_deploy.fleet": "ddtree_deploy.fleet.run",
    "ddtree_deploy.patchset": "ddtree_deploy.patchset.author",
    "ddtree_deploy.transport": "ddtree_deploy.transport.ssh",
}


def type_checking_imports(package: str) -> dict[str, str]:
    """{name: home submodule} of the `if typing.TYPE_CHECKING:` imports of `package`."""
    source = Path(importlib.import_module(package).__file__).read_text()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                home = stmt.module.removeprefix(f"{package}.")
                found.update({alias.name: home for alias in stmt.names})
    return found


@pytest.mark.parametrize("package", sorted(LAZY))
def test_the_lazy_table_is_what_type_checkers_see(package):
    module = importlib.import_module(package)
    homes = module.__getattr__.homes
    assert homes == type_checking_imports(package)
    for name, home in homes.items():
        assert name in module.__all__
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{home}"), name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        module.nope  # noqa: B018


@pytest.mark.parametrize("package", sorted(LAZY))
def test_importing_a_package_does_not_load_its_lazy_home(package):
    """Each in a fresh python alone: `transport` loads the agent protocol, on purpose."""
    code = f"import json, sys, {package}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert package in loaded  # the probe ran
    assert LAZY[package] not in loaded


def test_asking_for_a_lazy_name_loads_its_home():
    # Control for the test above: the same probe sees the home once a name is used.
    asked = subprocess.run(
        [sys.executable, "-c", "import sys, ddtree_deploy.fleet as f; f.run_rollout;"
         "print('ddtree_deploy.fleet.run' in sys.modules)"],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    assert asked.stdout.strip() == "True"
