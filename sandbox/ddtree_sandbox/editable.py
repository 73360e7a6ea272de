"""Sandbox hosts whose sglang is an EDITABLE install, laid out as in the official
lmsysorg/sglang image: the source tree at ``/sgl-workspace/sglang/python`` and, in the host
venv's site-packages, only what ``pip install -e`` leaves there (a dist-info whose RECORD lists
no package file, a .pth and setuptools' import finder).

Use: ``start_sandbox(..., customize=bind_workspace)`` then ``make_editable(host)`` on each
started host. The editable install is made by the machine's own pip and setuptools (Debian's
python3-pip/python3-setuptools/python3-wheel, offline: ``--no-index --no-build-isolation``)
run inside the host, so its finder maps ``sglang`` to the host's own path. The source tree is
the host's pristine wheel files moved (a rename: the .pyc stay valid), plus a minimal
pyproject.toml; about 2 s per host.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from ddtree_sandbox.host import SandboxHost
from ddtree_sandbox.sshd import SshdSpec

WORKSPACE = "/sgl-workspace"  # bind-mounted from <hostdir>/sgl-workspace in namespaced mode
SOURCE_REL = "sglang/python"  # the project dir under the workspace (pyproject.toml, sglang/)
# The system python's packaging tools (Debian): pip 23, setuptools >= 64 (PEP 660), wheel.
SYSTEM_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "{version}"

[tool.setuptools.packages.find]
include = ["sglang*"]
"""


def workspace_on_disk(host: SandboxHost) -> Path:
    """The host's /sgl-workspace as the controller sees it."""
    return host.hostdir / "sgl-workspace"


def source_on_disk(host: SandboxHost) -> Path:
    """The editable project dir (holding ``sglang/``) as the controller sees it."""
    return workspace_on_disk(host) / SOURCE_REL


def source_path(host: SandboxHost) -> str:
    """The editable project dir as the host sees it (what the agent reports as root)."""
    if host.namespaced:
        return f"{WORKSPACE}/{SOURCE_REL}"
    return str(source_on_disk(host))


def bind_workspace(host: SandboxHost, spec: SshdSpec) -> SshdSpec:
    """start_sandbox's ``customize``: give the host its own /sgl-workspace (namespaced mode:
    a bind mount over the machine's empty /sgl-workspace mount point, created here)."""
    workspace_on_disk(host).mkdir(parents=True, exist_ok=True)
    if not host.namespaced:
        return spec
    Path(WORKSPACE).mkdir(exist_ok=True)
    binds = (*spec.extra_binds, (str(workspace_on_disk(host)), WORKSPACE))
    return dataclasses.replace(spec, extra_binds=binds)


def make_editable(host: SandboxHost, version: str) -> Path:
    """Turn the started ``host``'s wheel install of sglang ``version`` into an editable one;
    return the project dir on disk. Raises RuntimeError with pip's output when pip fails."""
    site = host.site_packages_on_disk
    source = source_on_disk(host)
    source.mkdir(parents=True, exist_ok=True)
    (site / "sglang").rename(source / "sglang")
    shutil.rmtree(site / f"sglang-{version}.dist-info")
    shutil.rmtree(site / "tools", ignore_errors=True)  # the wheel's stray top-level package
    (source / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    pip = (
        f"PYTHONPATH={SYSTEM_DIST_PACKAGES} {host.python} -m pip install --quiet "
        "--disable-pip-version-check --no-deps --no-build-isolation --no-index "
        f"-e {source_path(host)}"
    )
    done = host.run(pip, timeout_s=300)
    if done.returncode != 0:
        raise RuntimeError(f"{host.name}: pip install -e failed: {done.stdout}{done.stderr}")
    return source
