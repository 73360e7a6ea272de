"""The work dir of a port that stopped on a conflict: each file's merged text + port.json.

Layout: `<work>/port.json` (the old ref, the new target and version, and per file its
outcome and the sha256 of base, ours and theirs) and `<work>/files/<path>`: every file's
result text, conflict markers included, for the user to resolve in place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.merge import find_markers
from ddtree_deploy.patchset.models import Target
from ddtree_deploy.patchset.port import FilePort, PortStatus

STATE_NAME = "port.json"
WORK_ROOT = ".ddtree-port"
STATE_VERSION = 1


class SavedFile(BaseModel):
    """One file of port.json: a FilePort without its texts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    old_kind: Literal["new", "patch"]
    new_kind: Literal["new", "patch"] | None
    status: PortStatus
    base_sha256: str | None
    ours_sha256: str
    theirs_sha256: str | None


class PortState(BaseModel):
    """port.json: which port this work dir belongs to and how each file came out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state_version: int = STATE_VERSION
    old: str
    target: Target
    version: str
    files: list[SavedFile]

    @classmethod
    def of(cls, old: str, target: Target, version: str, files: list[FilePort]) -> PortState:
        saved = [
            SavedFile(
                path=f.path,
                old_kind=f.old_kind,
                new_kind=f.new_kind,
                status=f.status,
                base_sha256=f.base_sha256,
                ours_sha256=f.ours_sha256,
                theirs_sha256=f.theirs_sha256,
            )
            for f in files
        ]
        return cls(old=old, target=target, version=version, files=saved)


def work_dir_for(base: Path, new_ref: str) -> Path:
    """Return the default work dir of the port to `new_ref`: `.ddtree-port/NEW_REF` beside
    the patchsets directory `base`."""
    return base.resolve().parent / WORK_ROOT / new_ref


def write_work_dir(work: Path, state: PortState, files: list[FilePort]) -> None:
    """Write port.json and every file's result text under `work` (created)."""
    for item in files:
        if item.result is not None:
            target = work / "files" / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(item.result.encode("utf-8"))
    text = json.dumps(state.model_dump(), indent=2) + "\n"
    (work / STATE_NAME).write_text(text, encoding="utf-8")


def read_state(work: Path) -> PortState:
    """Return the work dir's port.json; PatchsetError when missing or unreadable."""
    path = work / STATE_NAME
    if not path.is_file():
        raise PatchsetError(f"{path}: not found: no port in progress there (see --work-dir)")
    try:
        return PortState.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise PatchsetError(f"{path}: unreadable: {str(exc).splitlines()[0]}") from None


def read_resolved(work: Path, state: PortState) -> dict[str, str]:
    """Return each kept file's text from the work dir; PatchsetError naming every file and
    line that still holds a conflict marker, or a missing file."""
    texts: dict[str, str] = {}
    left: list[str] = []
    for saved in state.files:
        if saved.new_kind is None:
            continue
        path = work / "files" / saved.path
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise PatchsetError(f"{path}: missing from the work dir") from None
        except UnicodeDecodeError:
            raise PatchsetError(f"{path}: not UTF-8 text") from None
        lines = find_markers(text)
        if lines:
            shown = ", ".join(str(n) for n in lines[:5]) + (" ..." if len(lines) > 5 else "")
            left.append(f"{path} (line {shown})")
        texts[saved.path] = text
    if left:
        raise PatchsetError("conflict markers left in: " + "; ".join(left))
    return texts
