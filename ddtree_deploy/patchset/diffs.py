"""Write the one-file unified diffs a patchset's `patches/` holds (authoring and porting).

difflib makes the hunks; this module adds what difflib leaves out and our exact applier
(`apply_unified_diff`) needs: `a/PATH` / `b/PATH` headers and the "\\ No newline at end of
file" marker. Every diff is applied back to its base before it is returned, so a diff we
write is one our push can apply, byte for byte.
"""

from __future__ import annotations

import difflib

from ddtree_deploy.agent.host.pure import apply_unified_diff
from ddtree_deploy.errors import PatchsetError

NO_EOL = "\\ No newline at end of file\n"
CONTEXT_LINES = 3


def unified_diff(path: str, base: str, result: str, context: int = CONTEXT_LINES) -> str:
    """Return the diff that turns `base` into `result` for the file at `path` (relative to
    site-packages), headed `--- a/PATH` / `+++ b/PATH`; "" when the two are equal.

    Raises PatchsetError when the diff would not rebuild `result` exactly (a text with
    lone carriage returns or other line endings difflib and the applier see differently).
    """
    if base == result:
        return ""
    old = base.splitlines(keepends=True)
    new = result.splitlines(keepends=True)
    out: list[str] = []
    for line in difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=context):
        if line.startswith(("--- ", "+++ ")):
            out.append(line.rstrip("\n") + "\n")  # difflib ends headers with lineterm
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_EOL)
    diff = "".join(out)
    try:
        rebuilt = apply_unified_diff(base, diff)
    except ValueError as exc:
        raise PatchsetError(f"{path}: the diff written does not apply to its base: {exc}") from None
    if rebuilt != result:
        raise PatchsetError(
            f"{path}: a unified diff cannot rebuild this file exactly (mixed line endings?)"
        )
    return diff


def file_patch(path: str, old: str | None, new: str | None, context: int = CONTEXT_LINES) -> str:
    """Return the patch that turns ``old`` into ``new`` at ``path`` (relative to
    site-packages), as `git apply` and `patch -p1` read it: `a/PATH` / `b/PATH` headers, or
    `/dev/null` for the side that lacks the file (None: created or deleted), and the
    "no newline" marker. "" when the two are equal. Not checked with our applier (which
    takes no creation or deletion); `patchset diff` writes it for people and for git.
    """
    if old == new:
        return ""
    a_name = "/dev/null" if old is None else f"a/{path}"
    b_name = "/dev/null" if new is None else f"b/{path}"
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    out: list[str] = []
    for line in difflib.unified_diff(old_lines, new_lines, a_name, b_name, n=context):
        if line.startswith(("--- ", "+++ ")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_EOL)
    return "".join(out)
