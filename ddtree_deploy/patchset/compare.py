"""What changed between two patchsets: their files and each file's RESULT (`patchset diff`).

Both are materialised from their own pinned wheels, so two versions for different sglang
releases compare by what they install, not by their diffs' text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ddtree_deploy.patchset.diffs import file_patch
from ddtree_deploy.patchset.load import Patchset
from ddtree_deploy.patchset.materialize import Materialized, digest, fetch_wheel, materialize

FileChange = Literal["only_a", "only_b", "changed", "same"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Side(_Frozen):
    """One patchset of the comparison: its ref and its target (PKG==VERSION)."""

    ref: str
    target: str


class FileDiff(_Frozen):
    """One path: where it is, each side's kind and result sha256, the patch from A's
    installed file to B's (`compare_file`; "" when `same`), and its lines added/removed
    (a new file only in B adds all its lines, one only in A removes all of its)."""

    path: str
    change: FileChange
    a_kind: Literal["new", "patch"] | None
    b_kind: Literal["new", "patch"] | None
    a_sha256: str | None
    b_sha256: str | None
    added: int = 0
    removed: int = 0
    diff: str = ""


class PatchsetDiff(_Frozen):
    """`patchset diff A B`: both sides and every path either owns, sorted by path."""

    a: Side
    b: Side
    files: list[FileDiff]

    @property
    def identical(self) -> bool:
        return all(f.change == "same" for f in self.files)


def diff_patchsets(a: Patchset, b: Patchset) -> PatchsetDiff:
    """Return what changed from `a` to `b`; raises PatchsetError when either does not
    materialise (a wheel cannot be fetched, a diff does not apply)."""
    ours = {m.entry.path: m for m in materialize(a, fetch_wheel(a.spec.target))}
    theirs = {m.entry.path: m for m in materialize(b, fetch_wheel(b.spec.target))}
    files = [
        compare_file(path, ours.get(path), theirs.get(path), a.ref, b.ref)
        for path in sorted(ours.keys() | theirs.keys())
    ]
    return PatchsetDiff(a=_side(a), b=_side(b), files=files)


def compare_file(
    path: str, a: Materialized | None, b: Materialized | None, a_ref: str, b_ref: str
) -> FileDiff:
    """Return how `path` differs between the two sides (None: that side lacks it).

    The diff turns A's installed file into B's: a side that does not own `path` leaves it
    as the wheel has it (the other side's base; absent when that is a new file), so the
    patch applies to a site-packages holding A (`git apply`, `patch -p1`).
    """
    change: FileChange
    if a is None or b is None:
        change = "only_b" if a is None else "only_a"
    else:
        change = "same" if a.result == b.result else "changed"
    old = a.result if a is not None else (b.base if b is not None else None)
    new = b.result if b is not None else (a.base if a is not None else None)
    text = "" if change == "same" else _result_diff(path, old, new)
    lines = text.splitlines()[2:]  # after the two header lines
    return FileDiff(
        path=path,
        change=change,
        a_kind=None if a is None else a.entry.kind,
        b_kind=None if b is None else b.entry.kind,
        a_sha256=None if a is None else digest(a.result),
        b_sha256=None if b is None else digest(b.result),
        added=sum(line.startswith("+") for line in lines),
        removed=sum(line.startswith("-") for line in lines),
        diff=text,
    )


def _result_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """The patch (diffs.file_patch) from one side's installed bytes to the other's."""
    return file_patch(
        path,
        None if old is None else old.decode("utf-8"),
        None if new is None else new.decode("utf-8"),
    )


def _side(patchset: Patchset) -> Side:
    target = patchset.spec.target
    return Side(ref=patchset.ref, target=f"{target.package}=={target.version}")
