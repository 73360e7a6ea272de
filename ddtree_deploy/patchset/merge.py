"""Three-way merge of one text file, and the conflict markers it leaves (for `patchset port`).

The engine is `git merge-file --diff3`, chosen over the `merge3` PyPI package because:
it is the merge (and the marker format, base section included) that patch authors already
resolve in `git merge`/`git rebase` and that editors highlight; git is on every machine that
authors patchsets (they come from `git diff`) and on CI, which runs from a clone; and it adds
no product dependency for one function. Without git on PATH, porting stops with one clear error.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddtree_deploy.errors import PatchsetError

MARKER_PREFIXES = ("<<<<<<< ", "||||||| ", ">>>>>>> ")
MARKER_SEPARATOR = "======="
_MAX_CONFLICTS = 127  # git merge-file exits with the conflict count, capped; more is an error


@dataclass(frozen=True)
class MergedText:
    """What a three-way merge gave: the text (with markers where it conflicts), the count."""

    text: str
    conflicts: int


def merge_texts(base: str, ours: str, theirs: str, labels: tuple[str, str, str]) -> MergedText:
    """Return the three-way merge of `ours` and `theirs` from their common `base`.

    `labels` name (ours, base, theirs) on the conflict markers. Raises PatchsetError when git
    is missing or merge-file fails (not for conflicts: those are in the result).
    """
    with tempfile.TemporaryDirectory(prefix="ddtree-merge-") as tmp:
        paths = [Path(tmp) / name for name in ("ours", "base", "theirs")]
        for path, text in zip(paths, (ours, base, theirs), strict=True):
            path.write_bytes(text.encode("utf-8"))
        cmd = ["git", "merge-file", "-p", "--diff3"]
        for label in labels:
            cmd += ["-L", label]
        try:
            done = subprocess.run(
                [*cmd, *map(str, paths)], capture_output=True, cwd=tmp, check=False
            )
        except FileNotFoundError:
            raise PatchsetError(
                "porting a patchset needs git on PATH (its three-way merge is git merge-file)"
            ) from None
    if not 0 <= done.returncode <= _MAX_CONFLICTS:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise PatchsetError(f"git merge-file failed: {reason}")
    return MergedText(text=done.stdout.decode("utf-8"), conflicts=done.returncode)


def find_markers(text: str) -> list[int]:
    """Return the 1-based numbers of the lines of `text` that are conflict markers."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(MARKER_PREFIXES) or line.rstrip() == MARKER_SEPARATOR:
            found.append(number)
    return found


def conflict_starts(text: str) -> list[int]:
    """Return the 1-based line numbers where the conflicts of `text` begin (`<<<<<<< `)."""
    lines = text.splitlines()
    return [n for n in find_markers(text) if lines[n - 1].startswith(MARKER_PREFIXES[0])]
