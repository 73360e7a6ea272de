"""Plan the port of a patchset onto another release of its target: one outcome per file.

For each file the old patchset owns: base = the old pinned wheel's file, ours = the old
result, theirs = the new pinned wheel's file. A three-way merge of the three gives the new
result. Everything here is pure but for the merge engine (`merge.merge_texts`, git).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from packaging.version import InvalidVersion, Version

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.materialize import Materialized, digest
from ddtree_deploy.patchset.merge import merge_texts
from ddtree_deploy.patchset.models import Target

# clean:    theirs == base, the old diff applies unchanged (result = ours)
# merged:   both sides changed the file, in places that do not overlap
# conflict: both changed the same lines (markers in the work dir), or a new file of ours
#           collides with a file the new release ships
# gone:     the patched file does not exist in the new release
# carried:  a new file of ours, absent from the new release: copied as it is
# upstream: the new release already holds our change (result == theirs): the entry is dropped
# resolved: a conflict whose markers the user removed (`port --continue`)
PortStatus = Literal["clean", "merged", "conflict", "gone", "carried", "upstream", "resolved"]
STOPPING: frozenset[str] = frozenset({"conflict", "gone"})
_TO_ARG = re.compile(r"^([A-Za-z0-9_\-]+)==([0-9][A-Za-z0-9.+\-]*)$")


@dataclass(frozen=True)
class FilePort:
    """One file's port: its outcome and the new result (markers included on a conflict).

    `new_kind` is what the ported patchset holds: "new" (the whole file) or "patch" (a diff
    against the new release's file); None when the file leaves the patchset (gone, upstream).
    Hashes are sha256 hex of the old wheel's file (base), the old result (ours) and the new
    wheel's file (theirs; None when absent).
    """

    path: str
    old_kind: Literal["new", "patch"]
    new_kind: Literal["new", "patch"] | None
    status: PortStatus
    result: str | None
    theirs: str | None
    base_sha256: str | None
    ours_sha256: str
    theirs_sha256: str | None


def parse_to_arg(value: str, old: Target) -> Target:
    """Return the Target `--to PKG==VERSION` names; PatchsetError for another package, the
    old target's own version, or a malformed value."""
    match = _TO_ARG.match(value)
    if match is None:
        raise PatchsetError(f"--to {value!r}: give PACKAGE==VERSION, e.g. sglang==0.5.13")
    package, version = match.groups()
    if package != old.package:
        raise PatchsetError(f"--to {value!r}: the patchset targets {old.package}, not {package}")
    if version == old.version:
        raise PatchsetError(
            f"--to {value!r}: the patchset already targets {old.package}=={version}"
        )
    return Target(package=package, version=version)


def default_port_version(old_version: str, to: Target) -> str:
    """Return the version a port gets without `--as`: the old public version with a local
    label naming the new target (1.0.0 -> 1.0.0+sglang0.5.13; 1.0.0+sglang0.5.13 ->
    1.0.0+sglang0.5.12).

    A bumped patch number would clash with hotfixes of the same target and say nothing of
    the port; the label is unique per (version, target) and sorts after the version ported.
    """
    public = old_version.split("+", 1)[0]
    label = re.sub(r"[^A-Za-z0-9]", "", to.package) + re.sub(r"[^A-Za-z0-9.]", ".", to.version)
    return f"{public}+{label}"


def check_port_version(version: str) -> str:
    """Return `version` if a patchset may carry it (PEP 440, MAJOR.MINOR.PATCH[sep label])."""
    shape = re.match(r"^[0-9]+\.[0-9]+\.[0-9]+([.\-+][A-Za-z0-9.]+)?$", version)
    try:
        Version(version)
    except InvalidVersion:
        shape = None
    if shape is None:
        raise PatchsetError(
            f"version {version!r}: not a patchset version (MAJOR.MINOR.PATCH and at most one "
            f"label, e.g. 1.0.1 or 1.0.0+x); give one with --as"
        )
    return version


def plan_port(
    ours: list[Materialized], theirs: dict[str, bytes | None], labels: tuple[str, str, str]
) -> list[FilePort]:
    """Return each file's port, in the old patchset's order.

    `ours`: the old patchset materialised from its wheel; `theirs`: each path's bytes in the
    new wheel (None: absent); `labels`: (ours, base, theirs) for the conflict markers.
    """
    return [_port_file(item, theirs.get(item.entry.path), labels) for item in ours]


def _port_file(item: Materialized, theirs: bytes | None, labels: tuple[str, str, str]) -> FilePort:
    path, kind = item.entry.path, item.entry.kind
    ours_text = item.result.decode("utf-8")
    theirs_text = None if theirs is None else theirs.decode("utf-8")

    def port(
        status: PortStatus, new_kind: Literal["new", "patch"] | None, result: str | None
    ) -> FilePort:
        return FilePort(
            path=path,
            old_kind=kind,
            new_kind=new_kind,
            status=status,
            result=result,
            theirs=theirs_text,
            base_sha256=None if item.base is None else digest(item.base),
            ours_sha256=digest(item.result),
            theirs_sha256=None if theirs is None else digest(theirs),
        )

    if theirs_text is None:
        return port("carried", "new", ours_text) if kind == "new" else port("gone", None, None)
    if ours_text == theirs_text:
        return port("upstream", None, theirs_text)
    if kind == "new":  # the new release ships a file where ours was new: the user decides
        merged = merge_texts("", ours_text, theirs_text, labels)
        return port("conflict", "patch", merged.text)
    assert item.base is not None  # materialize refuses a patch without its base
    if item.base == theirs:
        return port("clean", "patch", ours_text)
    merged = merge_texts(item.base.decode("utf-8"), ours_text, theirs_text, labels)
    if merged.conflicts:
        return port("conflict", "patch", merged.text)
    if merged.text == theirs_text:
        return port("upstream", None, merged.text)
    return port("merged", "patch", merged.text)
