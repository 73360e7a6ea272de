"""Helpers shared by tests: run the real CLI, build patchset variants in a temp dir."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DDTREE_100 = REPO / "patchsets" / "ddtree" / "1.0.0"
FAST_SUITES = ["integrity", "compile"]


def run_cli(
    *args: str, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python -m ddtree_deploy ARGS` in a real process; stdout/stderr captured as text."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ddtree_deploy", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=REPO,
    )


def make_patchset(
    root: Path,
    suites: list[str] | None = None,
    after_restart: list[str] | None = None,
    mutate: Callable[[Path], None] | None = None,
    version: str = "1.0.0",
    lock: bool = True,
) -> Path:
    """Copy ddtree 1.0.0 to root/patchsets/ddtree/VERSION, edit it, lock it; returns the dir
    holding patchsets (what --patchsets-dir takes)."""
    from ddtree_deploy.patchset import load_patchset, write_lock

    dest = root / "patchsets" / "ddtree" / version
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(DDTREE_100, dest, ignore=shutil.ignore_patterns("patchset.lock.json"))
    text = (dest / "patchset.toml").read_text()
    spec = tomllib.loads(text)
    smoke = spec.get("smoke", {})
    smoke["suites"] = FAST_SUITES if suites is None else suites
    smoke["after_restart"] = after_restart or []
    head = text.split("[smoke]")[0].replace('version = "1.0.0"', f'version = "{version}"', 1)
    body = "\n".join(f"{k} = {_toml(v)}" for k, v in smoke.items())
    (dest / "patchset.toml").write_text(f"{head}[smoke]\n{body}\n")
    if mutate:
        mutate(dest)
    if lock:
        write_lock(load_patchset(dest))
    return root / "patchsets"


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def utils_file(patchset_root: Path) -> Path:
    return patchset_root / "files" / "sglang" / "srt" / "speculative" / "ddtree_utils.py"
