"""The files a port writes: the new patchset (atomically, locked, gated) or the work dir.

`port_patchset` reads both wheels, plans every file (`port.plan_port`) and then writes either
the new version directory (every file clean, merged or carried) or, on a conflict, a work dir
holding each file's merged text and `port.json`; `continue_port` reads that work dir back
once the user removed the markers and writes the patchset exactly as a clean port would.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.copy import copy_version
from ddtree_deploy.patchset.diffs import unified_diff
from ddtree_deploy.patchset.load import SPEC_NAME, Patchset, load_patchset
from ddtree_deploy.patchset.lock import verify_patchset, write_lock
from ddtree_deploy.patchset.materialize import digest, fetch_wheel, materialize
from ddtree_deploy.patchset.models import FileEntry, PatchsetLock, Target
from ddtree_deploy.patchset.port import (
    STOPPING,
    FilePort,
    check_port_version,
    default_port_version,
    plan_port,
)
from ddtree_deploy.patchset.port_state import (
    PortState,
    read_resolved,
    read_state,
    work_dir_for,
    write_work_dir,
)
from ddtree_deploy.patchset.port_toml import edit_spec_text


@dataclass(frozen=True)
class PortReport:
    """What a port did: every file's outcome, and the patchset written or the work dir."""

    old_ref: str
    new_ref: str
    target: Target
    files: list[FilePort]
    written: Patchset | None = None
    lock: PatchsetLock | None = None
    work_dir: Path | None = None

    @property
    def stopped(self) -> bool:
        """Whether a conflict or a gone file kept the port from writing a patchset."""
        return self.written is None


def port_patchset(
    base: Path, old: Patchset, to: Target, version: str | None, work_dir: Path | None
) -> PortReport:
    """Port `old` onto `to`: write NAME/VERSION under `base`, or the work dir on a conflict.

    Nothing is written when a file is gone. Raises PatchsetError (nothing written) for an
    existing version directory or work dir, an unknown target version, or an old patchset
    that does not verify.
    """
    version = check_port_version(version or default_port_version(old.spec.version, to))
    new_ref = f"{old.spec.name}@{version}"
    dest = _free_dest(base, old.spec.name, version)
    work = work_dir or work_dir_for(base, new_ref)
    if work.exists():
        raise PatchsetError(
            f"{work}: a port to {new_ref} is in progress: resolve it and rerun with "
            f"--continue, or delete that directory to start over"
        )
    theirs_wheel = fetch_wheel(to)
    verify_patchset(old)
    ours = materialize(old, fetch_wheel(old.spec.target))
    theirs = _read_paths(theirs_wheel, [m.entry.path for m in ours])
    old_target = f"{old.spec.target.package}=={old.spec.target.version}"
    labels = (f"{old.ref} (ours)", f"{old_target} (base)", f"{to.package}=={to.version} (theirs)")
    files = plan_port(ours, theirs, labels)
    report = PortReport(old_ref=old.ref, new_ref=new_ref, target=to, files=files)
    statuses = {f.status for f in files}
    if "gone" in statuses:
        return report
    if "conflict" in statuses:
        write_work_dir(work, PortState.of(old.ref, to, version, files), files)
        return replace(report, work_dir=work)
    written, lock = write_ported(old, files, to, version, dest)
    return replace(report, written=written, lock=lock)


def continue_port(
    base: Path, old: Patchset, to: Target, version: str | None, work_dir: Path | None
) -> PortReport:
    """Finish the port whose work dir the user resolved; write the patchset, drop the dir.

    Raises PatchsetError (nothing written) when there is no such work dir, it is for another
    port, a file still holds conflict markers, or a wheel or the old patchset changed since.
    """
    version = version or default_port_version(old.spec.version, to)
    new_ref = f"{old.spec.name}@{version}"
    work = work_dir or work_dir_for(base, new_ref)
    state = read_state(work)
    if (state.old, state.target, state.version) != (old.ref, to, version):
        raise PatchsetError(
            f"{work}: holds the port of {state.old} to {state.target.package}=="
            f"{state.target.version} as {state.version}, not of {old.ref} to "
            f"{to.package}=={to.version} as {version}"
        )
    dest = _free_dest(base, old.spec.name, version)
    texts = read_resolved(work, state)
    theirs = _read_paths(fetch_wheel(to), [f.path for f in state.files])
    locked = old.require_lock().files
    files = []
    for saved in state.files:
        now = theirs.get(saved.path)
        if (None if now is None else digest(now)) != saved.theirs_sha256:
            raise PatchsetError(f"{work}: {saved.path}: the {to.version} wheel changed since")
        old_file = locked.get(saved.path)
        if old_file is None or old_file.result_sha256 != saved.ours_sha256:
            raise PatchsetError(f"{work}: {saved.path}: {old.ref} changed since the port began")
        item = FilePort(
            **saved.model_dump(),
            result=texts.get(saved.path),
            theirs=None if now is None else now.decode("utf-8"),
        )
        if item.status == "conflict":  # resolved to the new release's own text: drop it
            same = item.result == item.theirs
            item = replace(item, status="upstream" if same else "resolved")
            item = replace(item, new_kind=None) if same else item
        files.append(item)
    written, lock = write_ported(old, files, to, version, dest)
    shutil.rmtree(work)
    return PortReport(old.ref, new_ref, to, files, written=written, lock=lock)


def write_ported(
    old: Patchset, files: list[FilePort], to: Target, version: str, dest: Path
) -> tuple[Patchset, PatchsetLock]:
    """Write the ported patchset at `dest` (a copy of `old` with fresh diffs and spec), lock
    it and run the local gate, all in a temp dir renamed into place; return it and its lock.
    """
    if any(f.status in STOPPING for f in files):
        raise PatchsetError("a port with conflicts or gone files cannot be written")
    staging = dest.parent.parent / f".tmp-port-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    root = staging / dest.parent.name / dest.name
    try:
        # Self-contained: shared sources become the new version's own files (a merged diff
        # cannot stay the old blob); `patchset dedupe NAME` shares them again.
        copy_version(old, root, own_files=True, lock=False)
        entries = _write_sources(old, root, files)
        spec_path = root / SPEC_NAME
        text = spec_path.read_text(encoding="utf-8")
        edited = edit_spec_text(text, version, to.version, old.ref, entries)
        spec_path.write_text(edited, encoding="utf-8")
        write_lock(load_patchset(root))
        verify_patchset(load_patchset(root))
        if dest.exists():
            raise PatchsetError(f"{dest}: appeared while porting; nothing written")
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(root, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    written = load_patchset(dest)
    return written, written.require_lock()


def _write_sources(old: Patchset, root: Path, files: list[FilePort]) -> dict[str, FileEntry | None]:
    """Write each file's new source under `root`; return the entries whose table changes
    (a new file that became a patch, a file that left the patchset)."""
    by_path = {e.path: e for e in old.spec.files}
    changed: dict[str, FileEntry | None] = {}
    for item in files:
        entry = by_path[item.path]
        if item.new_kind is None:
            (root / entry.source).unlink()
            changed[item.path] = None
            continue
        assert item.result is not None
        if item.new_kind == "new":
            (root / entry.source).write_bytes(item.result.encode("utf-8"))
            continue
        if entry.kind == "new":
            (root / entry.source).unlink()
            entry = FileEntry(path=item.path, patch=_free_patch_name(root, item.path))
            changed[item.path] = entry
        if item.status == "clean":
            continue  # theirs == base: the old diff (copied) applies unchanged
        assert item.theirs is not None  # a patch always has the new release's file
        diff = unified_diff(item.path, item.theirs, item.result)
        target = root / entry.source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(diff.encode("utf-8"))
    return changed


def _free_patch_name(root: Path, path: str) -> str:
    stem = path.rsplit("/", 1)[-1]
    name, n = f"patches/{stem}.diff", 1
    while (root / name).exists():
        n += 1
        name = f"patches/{stem}.{n}.diff"
    return name


def _free_dest(base: Path, name: str, version: str) -> Path:
    dest = base / name / version
    if dest.exists():
        raise PatchsetError(f"{dest}: already exists; pick another version with --as")
    return dest


def _read_paths(wheel: Path, paths: list[str]) -> dict[str, bytes | None]:
    """Each path's bytes in `wheel` (None: the wheel has no such file)."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        return {p: zf.read(p) if p in names else None for p in paths}
