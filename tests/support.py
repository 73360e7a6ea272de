"""Helpers shared by tests: run the real CLI, build patchset variants in a temp dir, load
a payload file or a smoke script as a module, write a long-lived host's journal."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import tomli_w

REPO = Path(__file__).resolve().parents[1]
DDTREE_100 = REPO / "patchsets" / "ddtree" / "1.0.0"
UTILS = "sglang/srt/speculative/ddtree_utils.py"  # the new file shared by every ddtree version
FAST_SUITES = ["integrity", "compile"]
SMOKE_DIR = REPO / "ddtree_deploy" / "smoke"


def run_cli(
    *args: str, env: dict | None = None, timeout: float = 600, cwd: Path = REPO
) -> subprocess.CompletedProcess:
    """`python -m ddtree_deploy ARGS` in a real process (in `cwd`, default the checkout);
    stdout/stderr captured as text."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ddtree_deploy", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
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
    copy_patchset(DDTREE_100, dest, own_files=True, lock=False)  # every file its own, editable
    text = (dest / "patchset.toml").read_text()
    spec = tomllib.loads(text)
    smoke = spec.get("smoke", {})
    smoke["suites"] = FAST_SUITES if suites is None else suites
    smoke["after_restart"] = after_restart or []
    head = text.split("[smoke]")[0].replace('version = "1.0.0"', f'version = "{version}"', 1)
    (dest / "patchset.toml").write_text(f"{head}{tomli_w.dumps({'smoke': smoke})}")
    if mutate:
        mutate(dest)
    if lock:
        write_lock(load_patchset(dest))
    return root / "patchsets"


def copy_patchset(source: Path, dest: Path, own_files: bool = False, lock: bool = True) -> Path:
    """Copy the patchset version at `source` to `dest` (a NAME/VERSION folder) with its shared
    files (`copy_version`): as blobs in dest's store, or with `own_files` as its own files."""
    from ddtree_deploy.patchset import copy_version, load_patchset

    return copy_version(load_patchset(source), dest, own_files=own_files, lock=lock)


def patchset_file(patchset_root: Path, path: str = UTILS) -> Path:
    """Return the file holding the source bytes of entry `path` of the patchset at
    `patchset_root`: its own file, or its blob in the shared store (the product's resolver)."""
    from ddtree_deploy.patchset import load_patchset, source_file

    patchset = load_patchset(patchset_root)
    (entry,) = [e for e in patchset.spec.files if e.path == path]
    return source_file(patchset, entry)


def utils_file(patchset_root: Path) -> Path:
    """Return where ddtree_utils.py's bytes are for the patchset at `patchset_root`."""
    return patchset_file(patchset_root, UTILS)


def load_module(name: str, path: Path) -> ModuleType:
    """Return the module at `path`, registered under `name` (dataclasses need that)."""
    if name not in sys.modules:  # an explicit loader: a shared blob's name has no .py suffix
        loader = importlib.machinery.SourceFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def load_smoke_script(name: str, script: str) -> ModuleType:
    """Return smoke script `script` (e.g. "gpu.py") as module `name`, importing its `_*.py`
    helpers from beside it as a host does."""
    if str(SMOKE_DIR) not in sys.path:
        sys.path.append(str(SMOKE_DIR))
    return load_module(name, SMOKE_DIR / script)


JOURNAL_FILES = [{"path": f"sglang/srt/speculative/f{i}.py", "sha256": "ab" * 32} for i in range(6)]


def journal_history(deploys: int, prefix: str = "old", pending: bool = True) -> list[dict]:
    """A long-lived host's journal: `deploys` pushes (installing, committed). With `pending`
    the first one never finished and the tenth's rollback failed, so both are unfinished."""
    entries = []
    for i in range(deploys):
        deploy_id = f"2026{i:08d}-{prefix}"
        backup, ts = f"backups/{deploy_id}", "2026-12-03T00:00:00+00:00"
        entries.append(
            {
                "deploy_id": deploy_id,
                "state": "installing",
                "files": JOURNAL_FILES,
                "backup": backup,
                "ts": ts,
            }
        )
        if pending and i == 9:
            entries.append({"deploy_id": deploy_id, "state": "rollback_failed", "error": "x"})
        elif i or not pending:
            entries.append({"deploy_id": deploy_id, "state": "committed"})
    return entries


def write_journal(path: Path, entries: list[dict]) -> bytes:
    """Write `entries` as a journal (JSON Lines, 0600); return its bytes."""
    data = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries).encode()
    path.write_bytes(data)
    path.chmod(0o600)
    return data
