"""Author a patchset from a `Capture`: plan its directory (pure), then write and lock it.

`plan_patchset` turns what an edit changed into patchset.toml, the diffs under `patches/`
(written by `diffs.unified_diff`, which our applier rebuilds byte for byte) and the whole
files under `files/`. `new_patchset(request, source)` is what `patchset new` hands off to: a
`NewPatchset` (what to make) and a `CaptureSource` (tree, diff or host: it reads the edit
against the pristine wheel). `write_patchset` builds NAME/VERSION in a temp dir inside the patchsets
dir, locks it (apply, sha256, compile: the local gate), checks every locked result against
the captured bytes, and only then renames it into place: a refused patchset leaves nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.capture import Capture
from ddtree_deploy.patchset.diffs import unified_diff
from ddtree_deploy.patchset.load import (
    SPEC_NAME,
    Patchset,
    load_patchset,
    parse_patchset,
    resolve_patchset,
)
from ddtree_deploy.patchset.lock import check_sources, data_files, write_lock
from ddtree_deploy.patchset.materialize import digest, fetch_wheel
from ddtree_deploy.patchset.models import PatchsetLock, SmokeConfig, Target
from ddtree_deploy.patchset.toml_text import dump_toml

__all__ = [
    "Capture",
    "CaptureSource",
    "FileRow",
    "LikeSource",
    "NewPatchset",
    "PatchsetPlan",
    "WrittenPatchset",
    "new_patchset",
    "parse_new_ref",
    "parse_target",
    "plan_patchset",
    "prepare_plan",
    "read_like",
    "write_patchset",
]

# The tables a `--like` patchset lends (as written): how to smoke, serve and gate the code.
LIKE_TABLES = ("smoke", "serve", "lossless", "gate")


@dataclass(frozen=True)
class FileRow:
    """One line of the file table: a path, what happens to it, lines added and removed."""

    path: str
    kind: Literal["changed", "added", "ignored"]
    plus_lines: int = 0
    minus_lines: int = 0


@dataclass(frozen=True)
class LikeSource:
    """What `--like NAME@VERSION` lends: its tables as written, and the data files they name
    (lossless references, gate prompts; relative to its dir), copied beside the new spec."""

    ref: str
    root: Path
    tables: dict[str, Any]
    data_files: list[str]


@dataclass(frozen=True)
class PatchsetPlan:
    """A patchset directory before it is written: spec data and text, the sources
    (patchset-relative path -> bytes), the data files to copy from `like`, the file table."""

    spec: dict[str, Any]
    spec_text: str
    sources: dict[str, bytes]
    like: LikeSource | None
    rows: list[FileRow]


@dataclass(frozen=True)
class WrittenPatchset:
    """Where a patchset was written, what it holds, and its lock."""

    root: Path
    plan: PatchsetPlan
    lock: PatchsetLock


@dataclass(frozen=True)
class NewPatchset:
    """What `patchset new` asks for: NAME@VERSION under `patchsets_dir`, against `target`,
    with its description and the patchset it borrows tables from (`--like`), if any."""

    patchsets_dir: Path
    name: str
    version: str
    target: Target
    description: str = ""
    like: Patchset | None = None

    @classmethod
    def parse(
        cls,
        patchsets_dir: Path,
        ref: str,
        target: str,
        description: str = "",
        like: str | None = None,
    ) -> NewPatchset:
        """Read the command line's NAME@VERSION, PKG==VERSION and `--like` ref. Raises
        PatchsetError when one is malformed, the version exists already (a released version
        never changes) or `like` names no patchset: before any wheel is fetched."""
        pinned = parse_target(target)
        name, version = parse_new_ref(ref, pinned)
        request = cls(patchsets_dir, name, version, pinned, description)
        request.check_new()
        lent = resolve_patchset(patchsets_dir, like) if like else None
        return cls(patchsets_dir, name, version, pinned, description, lent)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def root(self) -> Path:
        """Where the patchset will live: PATCHSETS_DIR/NAME/VERSION."""
        return self.patchsets_dir / self.name / self.version

    def check_new(self) -> None:
        """Raise PatchsetError when this version exists already."""
        if self.root.exists():
            raise PatchsetError(f"{self.root}: already exists; a released version never changes")


# Reads the edit against the pristine wheel it is given: what changed and what was added.
CaptureSource = Callable[[Path], Capture]


def new_patchset(
    request: NewPatchset, source: CaptureSource, dry_run: bool = False
) -> PatchsetPlan | WrittenPatchset:
    """Capture the edit (`source`, fed the target's pristine wheel) and return the plan of
    the new patchset (`dry_run`: nothing is written) or the patchset written and locked.

    Raises PatchsetError when the version exists, the capture or the plan is refused, or
    the local gate fails (write_patchset).
    """
    request.check_new()
    wheel = fetch_wheel(request.target)
    capture = source(wheel)
    if dry_run:
        return prepare_plan(request, capture, wheel)
    return write_patchset(request, capture, wheel)


def parse_target(text: str) -> Target:
    """Return the Target of `PACKAGE==VERSION` (as `--target sglang==0.5.13.post1`)."""
    package, sep, version = text.partition("==")
    if not sep:
        raise PatchsetError(f"--target {text!r}: expected PACKAGE==VERSION, e.g. sglang==0.5.13")
    try:
        return Target(package=package.strip(), version=version.strip())
    except ValueError:
        raise PatchsetError(f"--target {text!r}: not a package name and version") from None


def parse_new_ref(ref: str, target: Target) -> tuple[str, str]:
    """Return (name, version) of a new patchset's `NAME@VERSION`, checked as a spec would be."""
    name, sep, version = ref.partition("@")
    if not (sep and name and version):
        raise PatchsetError(f"{ref!r}: give the new patchset as NAME@VERSION, e.g. ddtree@1.2.0")
    probe = {  # the one definition of a valid name and version: the spec model's
        "name": name,
        "version": version,
        "target": target.model_dump(),
        "file": [{"path": f"{target.package}/x.py", "new": "files/x.py"}],
    }
    parse_patchset(probe, Path(name, version, SPEC_NAME))
    return name, version


def plan_patchset(
    root: Path,
    target: Target,
    capture: Capture,
    bases: Mapping[str, bytes],
    description: str = "",
    like: LikeSource | None = None,
) -> PatchsetPlan:
    """Return the plan of patchset `root` (= PATCHSETS/NAME/VERSION, only named, not read).

    `bases` holds the wheel's bytes of every changed file. Raises PatchsetError when the
    capture deletes files (listed), holds nothing, or makes an invalid spec.
    """
    if capture.deleted:
        listed = ", ".join(capture.deleted)
        raise PatchsetError(
            f"{capture.source}: deletes {len(capture.deleted)} file(s) of the wheel, which a "
            f"patchset cannot do: {listed}"
        )
    if not capture.changed and not capture.added:
        raise PatchsetError(
            f"{capture.source}: no changes against {target.package}=={target.version}"
        )
    names = patch_names(sorted(capture.changed))
    files: list[dict[str, str]] = []
    sources: dict[str, bytes] = {}
    rows: list[FileRow] = []
    for path in sorted({*capture.changed, *capture.added}):
        if path in capture.changed:
            diff = unified_diff(path, _text(bases[path], path), _text(capture.changed[path], path))
            source = f"patches/{names[path]}"
            files.append({"path": path, "patch": source})
            sources[source] = diff.encode("utf-8")
            body = diff.splitlines()[2:]
            plus = sum(1 for ln in body if ln.startswith("+"))
            rows.append(FileRow(path, "changed", plus, sum(1 for ln in body if ln[:1] == "-")))
        else:
            source = f"files/{path}"
            files.append({"path": path, "new": source})
            sources[source] = capture.added[path]
            rows.append(FileRow(path, "added", len(capture.added[path].splitlines())))
    rows.extend(FileRow(path, "ignored") for path in capture.ignored)
    spec: dict[str, Any] = {
        "name": root.parent.name,
        "version": root.name,
        "description": description or f"captured from {capture.source}",
        "target": target.model_dump(),
        "file": files,
    }
    if like is not None:
        spec.update(like.tables)
    else:
        default = SmokeConfig()
        spec["smoke"] = {"suites": default.suites, "after_restart": default.after_restart}
    parse_patchset(spec, root / SPEC_NAME)
    return PatchsetPlan(spec, dump_toml(spec), sources, like, rows)


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchsetError(f"{path}: not UTF-8 text; a patchset holds text files only") from None


def patch_names(paths: list[str]) -> dict[str, str]:
    """Return each changed path's diff name: `BASENAME.diff`, or, where basenames clash, the
    path below the package with `-` for `/` (`srt-layers-__init__.py.diff`)."""
    basenames = [PurePosixPath(p).name for p in paths]
    out: dict[str, str] = {}
    for path, base in zip(paths, basenames, strict=True):
        name = base if basenames.count(base) == 1 else "-".join(path.split("/")[1:])
        while f"{name}.diff" in out.values():
            name = "_" + name
        out[path] = f"{name}.diff"
    return out


def read_like(patchset: Patchset) -> LikeSource:
    """Return what `patchset` lends to a new one (its LIKE_TABLES as written, its data)."""
    path = patchset.root / SPEC_NAME
    raw = tomllib.loads(path.read_text(encoding="utf-8"))  # load_patchset parsed it already
    tables = {key: raw[key] for key in LIKE_TABLES if key in raw}
    return LikeSource(patchset.ref, patchset.root, tables, sorted(data_files(patchset)))


def read_bases(wheel: Path, paths: list[str]) -> dict[str, bytes]:
    """Return the wheel's bytes of each of `paths`."""
    with zipfile.ZipFile(wheel) as zf:
        return {path: zf.read(path) for path in paths}


def prepare_plan(request: NewPatchset, capture: Capture, wheel: Path) -> PatchsetPlan:
    """Return the plan of the requested patchset (`plan_patchset` fed from the wheel and
    `request.like`); raises PatchsetError when that version exists already."""
    request.check_new()
    bases = read_bases(wheel, sorted(capture.changed))
    lent = None if request.like is None else read_like(request.like)
    return plan_patchset(request.root, request.target, capture, bases, request.description, lent)


def write_patchset(request: NewPatchset, capture: Capture, wheel: Path) -> WrittenPatchset:
    """Write, lock and check the requested patchset under its patchsets dir; return it.

    Built in a temp dir inside `patchsets_dir` and renamed into place at the end. Raises
    PatchsetError (nothing left behind) when the version exists, the plan is refused, or the
    local gate fails: a result does not compile, or differs from the captured bytes.
    """
    plan = prepare_plan(request, capture, wheel)
    final, patchsets_dir = request.root, request.patchsets_dir
    patchsets_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".new-", dir=patchsets_dir))
    try:
        root = staging / request.name / request.version  # the spec must live where it says
        _write_files(root, plan)
        lock = write_lock(load_patchset(root))  # applies every diff to the wheel, compiles
        check_sources(load_patchset(root))  # as push's local gate will read it
        _check_results(lock, capture, final)
        final.parent.mkdir(exist_ok=True)
        try:
            root.rename(final)
        except OSError as exc:
            raise PatchsetError(
                f"{final}: cannot move the new patchset into place: {exc}"
            ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return WrittenPatchset(final, plan, lock)


def _write_files(root: Path, plan: PatchsetPlan) -> None:
    """Write the spec, the sources and the data files `plan.like` lends under `root`."""
    root.mkdir(parents=True)
    (root / SPEC_NAME).write_text(plan.spec_text, encoding="utf-8")
    for rel, data in plan.sources.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    if plan.like is not None:
        for rel in plan.like.data_files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(plan.like.root / rel, root / rel)
            except OSError as exc:
                raise PatchsetError(f"{plan.like.root / rel}: cannot copy: {exc}") from None


def _check_results(lock: PatchsetLock, capture: Capture, final: Path) -> None:
    """Every locked result must be the captured file, byte for byte; raises otherwise."""
    for path, data in {**capture.changed, **capture.added}.items():
        if lock.files[path].result_sha256 != digest(data):
            got = json.dumps(lock.files[path].result_sha256)
            raise PatchsetError(
                f"{final}: {path}: the locked result {got} is not the captured file"
            )
