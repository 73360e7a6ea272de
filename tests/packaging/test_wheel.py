"""The product wheel: what it carries, and that the CLI runs from it with no checkout beside it.

The wheel is built offline (`pip wheel --no-deps --no-build-isolation`) from a copy of
pyproject.toml, README.md (its long description) and ddtree_deploy/, so the checkout gets
no build/ or egg-info and nothing undeclared can slip in. It is installed into a venv made
with --system-site-packages: the CLI's dependencies are not all in this machine's offline
package indexes, so a plain venv could not get them. The wheel itself goes in with --no-deps
--no-index, and each test checks that the venv's copy of ddtree_deploy is the one imported,
not the editable checkout of the system site.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, SMOKE_DIR

# every helper beside the suites (the checkout's), each shipped with every suite
SMOKE_HELPERS = [p.name for p in SMOKE_DIR.glob("_*.py") if p.name != "__init__.py"]


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # a working directory in no checkout

    def run(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run argv[0] from the venv's bin/ in `outside`, without this checkout on sys.path."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("DDTREE_DEPLOY_")}
        clean.pop("PYTHONPATH", None)
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=self.outside,
            env={**clean, "COLUMNS": "200", **(env or {})},
            timeout=300,
        )


def build_wheel(dist: Path, source: Path) -> Path:
    """Build the product wheel from pyproject.toml, README.md and ddtree_deploy/ copied to
    `source`."""
    shutil.copytree(
        REPO / "ddtree_deploy",
        source / "ddtree_deploy",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + [str(source), "-w", str(dist)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("ddtree_deploy-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root / "dist", root / "source")
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    subprocess.run(  # the system site's pip, installing into the venv
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        + ["--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=300,
    )
    outside = root / "elsewhere"
    outside.mkdir()
    return Installed(wheel=wheel, venv=venv, outside=outside)


def test_wheel_carries_the_smoke_suites_and_no_sandbox(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    suites = {f"ddtree_deploy/smoke/{p.name}" for p in SMOKE_DIR.glob("*.py")}
    assert suites and suites <= names, sorted(suites - names)
    top_levels = {name.split("/")[0] for name in names}
    assert not any("sandbox" in name for name in names), sorted(top_levels)
    assert not any(name.startswith(("patchsets/", "tests/", "bench/")) for name in names)


def test_wheel_leaves_the_devtools_out(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert "ddtree_deploy/devtools/__init__.py" not in names
    assert not any(name.startswith("ddtree_deploy/devtools/") for name in names)
    assert "ddtree_deploy/cli/app.py" in names  # the control: the package itself is there


def test_wheel_metadata_has_readme_licence_and_urls(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = wheel.read(meta_name).decode("utf-8")
    headers, _, body = metadata.partition("\n\n")
    assert "Description-Content-Type: text/markdown" in headers
    assert "License-Expression: Apache-2.0" in headers
    assert "Project-URL: SGLang, https://github.com/sgl-project/sglang" in headers
    assert body.startswith("# ddtree-deploy")  # README.md is the long description
    assert "## Exit codes" in body


def test_the_product_never_imports_the_sandbox():
    importers = []
    for path in (REPO / "ddtree_deploy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] == "ddtree_sandbox" for name in names):
                importers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not importers


def test_installed_wheel_is_the_one_imported(installed):
    done = installed.run("python", "-c", "import ddtree_deploy; print(ddtree_deploy.__file__)")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(installed.venv), done.stdout


def test_installed_cli_verifies_the_patchsets_and_reads_every_suite(installed):
    patchsets = str(REPO / "patchsets")
    verified = installed.run("ddtree-deploy", "patchset", "verify", "ddtree@1.1.0")
    assert verified.returncode == 2 and "--patchsets-dir" in verified.stderr  # no checkout here
    verified = installed.run(
        "ddtree-deploy", "patchset", "verify", "ddtree@1.1.0", "--patchsets-dir", patchsets
    )
    assert verified.returncode == 0, verified.stderr
    listed = installed.run(
        "ddtree-deploy", "patchset", "list", env={"DDTREE_DEPLOY_PATCHSETS": patchsets}
    )
    assert listed.returncode == 0 and "ddtree" in listed.stdout + listed.stderr, listed.stderr
    helped = installed.run("ddtree-deploy", "smoke", "--help")
    assert helped.returncode == 0, helped.stderr
    suites = sorted(p.stem for p in SMOKE_DIR.glob("[!_]*.py"))
    code = (
        "import sys; from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources; "
        "print(sorted(load_smoke_sources(sys.argv[1:], default_smoke_dir())))"
    )
    loaded = installed.run("python", "-c", code, *suites)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == str(sorted([*suites, *SMOKE_HELPERS]))
