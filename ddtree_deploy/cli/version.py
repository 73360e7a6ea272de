"""`ddtree-deploy --version`: this tool's version and what a bug report needs beside it
(python, paramiko, the sglang releases the bundled patchsets target)."""

from __future__ import annotations

import importlib.metadata
import platform
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import typer

from ddtree_deploy import __version__
from ddtree_deploy.errors import DeployError
from ddtree_deploy.patchset import default_patchsets_dir, list_patchsets, version_key


def installed_version(distribution: str) -> str:
    """Return the installed version of `distribution`, or "not installed" (read from its
    metadata: the module itself is not imported, so `--version` stays fast)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def target_lines(patchsets_dir: Path | None = None) -> list[str]:
    """One line per package release the patchsets target, e.g.
    `sglang 0.5.23: ddtree@2.0.0 ddtree@2.1.0`, oldest release first; one line saying why
    when there are none to read (no patchsets dir, a broken patchset)."""
    try:
        base = patchsets_dir or default_patchsets_dir()
        found = list_patchsets(base)
    except DeployError as exc:  # PatchsetError: no dir, or a patchset that does not load
        return [f"patchsets: none read ({exc})"]
    by_target: dict[tuple[str, str], list[str]] = defaultdict(list)
    for ps in found:
        by_target[(ps.spec.target.package, ps.spec.target.version)].append(ps.ref)
    if not by_target:
        return [f"patchsets: none in {base}"]
    lines = [f"patchsets: {base}"]
    for package, version in sorted(by_target, key=lambda t: (t[0], version_key(t[1]))):
        refs = " ".join(by_target[(package, version)])
        lines.append(f"{package} {version}: {refs}")
    return lines


def version_lines(patchsets_dir: Path | None = None) -> list[str]:
    """What `--version` prints: ddtree-deploy, python, paramiko, then `target_lines`."""
    return [
        f"ddtree-deploy {__version__}",
        f"python {platform.python_version()} ({platform.python_implementation()})",
        f"paramiko {installed_version('paramiko')}",
        *target_lines(patchsets_dir),
    ]


def show_version(value: bool) -> None:
    """The eager `--version` callback: print `version_lines` on stdout, exit 0."""
    if not value:
        return
    for line in version_lines():
        typer.echo(line)
    raise typer.Exit(0)


VersionOpt = Annotated[
    bool,
    typer.Option(
        "--version",
        is_eager=True,
        expose_value=False,
        callback=show_version,
        help="Print the version, python's and paramiko's, and the sglang releases the "
        "patchsets target (for bug reports); then exit.",
    ),
]
