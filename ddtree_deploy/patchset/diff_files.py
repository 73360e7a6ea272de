"""Split a multi-file unified diff (git's, or `diff -ruN`'s) into one section per file.

Pure: text in, `FileDiff` records out. Hunk bodies are read by their header's line counts, so
a removed line that reads "--- x" inside a hunk is never taken for a file header. What a
section means (which file, new or changed, does it apply) is decided by `author.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddtree_deploy.errors import PatchsetError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEV_NULL = "/dev/null"
# What `diff -N` prints as the date of a file that does not exist on that side.
_ABSENT_DATE = re.compile(r"\t1970-01-01[ T]00:00:00(\.0+)? \+0000\s*$")


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a diff: its two header paths (as written, prefixes kept), whether
    a side is absent (/dev/null, git's new/deleted file mode, or diff -N's epoch date),
    its hunks as one text our applier reads, and the diff line it starts on (1-based)."""

    old_path: str
    new_path: str
    old_absent: bool
    new_absent: bool
    hunks: str
    line: int


def split_file_diffs(text: str, label: str) -> list[FileDiff]:
    """Return every file section of the unified diff `text` (read from `label`), in order.

    Raises PatchsetError naming `label` and the line for what a patchset cannot hold or a
    reader cannot trust: binary changes, renames and copies, `Only in` lines (a `diff -r`
    made without -N), a hunk outside a file section or cut short, a diff with no file.
    """
    lines = text.splitlines(keepends=True)
    found: list[FileDiff] = []
    git_flags: set[str] = set()
    current = "the diff"  # the last `diff ...` line: names the file of a binary patch
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{label}: line {i + 1}"
        if line.startswith("diff "):
            git_flags, current = set(), line.strip()
        elif line.startswith(("new file mode", "deleted file mode")):
            git_flags.add(line.split()[0])
        elif line.startswith(("rename from", "rename to", "copy from", "copy to")):
            raise PatchsetError(f"{where}: renames and copies are not supported ({line.strip()})")
        elif line.startswith("GIT binary patch") or (
            line.startswith("Binary files ") and line.rstrip().endswith(" differ")
        ):
            what = line.strip() if line.startswith("Binary") else f"GIT binary patch in {current}"
            raise PatchsetError(
                f"{where}: a binary file ({what}); a patchset holds text files only"
            )
        elif line.startswith("Only in "):
            raise PatchsetError(
                f"{where}: {line.strip()!r}: a file on one side only has no content in the "
                "diff; make it with `diff -ruN` (-N shows added files whole)"
            )
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            end = _hunks_end(lines, i + 2, label)
            found.append(_file_diff(lines, i, end, git_flags, label))
            git_flags = set()
            i = end
            continue
        elif _HUNK.match(line):
            raise PatchsetError(f"{where}: a hunk without its ---/+++ file header")
        i += 1
    if not found:
        raise PatchsetError(f"{label}: no file diffs found (expected ---/+++ headers and hunks)")
    return found


def header_path(line: str) -> str:
    """Return the path of a `--- PATH` / `+++ PATH` header line (a tab-separated date and a
    git-quoted name's quotes dropped)."""
    path = line[4:].rstrip("\r\n").split("\t")[0]
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    return path


def _file_diff(lines: list[str], start: int, end: int, flags: set[str], label: str) -> FileDiff:
    """The FileDiff of the ---/+++ header at `start` whose hunks run to `end`."""
    old, new = lines[start], lines[start + 1]
    old_path, new_path = header_path(old), header_path(new)
    body = lines[start + 2 : end]
    if not any(_HUNK.match(ln) for ln in body):
        raise PatchsetError(f"{label}: line {start + 1}: {old_path!r} has no hunks")
    return FileDiff(
        old_path=old_path,
        new_path=new_path,
        old_absent="new" in flags or old_path == DEV_NULL or bool(_ABSENT_DATE.search(old)),
        new_absent="deleted" in flags or new_path == DEV_NULL or bool(_ABSENT_DATE.search(new)),
        hunks=f"--- {old_path}\n+++ {new_path}\n" + "".join(body),
        line=start + 1,
    )


def _hunks_end(lines: list[str], i: int, label: str) -> int:
    """Return the index just past the hunks starting at `i`, each hunk read by its header's
    counts; a bare empty line inside a hunk (trailing spaces stripped by an editor or a mail
    client) is taken as an empty context line and rewritten so. Raises on a cut-short hunk."""
    while i < len(lines):
        match = _HUNK.match(lines[i])
        if not match:
            return i
        old_left = int(match.group(2)) if match.group(2) is not None else 1
        new_left = int(match.group(4)) if match.group(4) is not None else 1
        header_at = i
        i += 1
        while old_left > 0 or new_left > 0:
            if i >= len(lines):
                raise PatchsetError(
                    f"{label}: line {header_at + 1}: hunk cut short ({old_left} old and "
                    f"{new_left} new lines missing)"
                )
            tag = lines[i][:1]
            if lines[i] in ("\n", "\r\n"):
                lines[i], tag = " " + lines[i], " "
            if tag == " ":
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag != "\\":
                raise PatchsetError(
                    f"{label}: line {i + 1}: unexpected {lines[i].rstrip()!r} inside the hunk "
                    f"at line {header_at + 1}"
                )
            if old_left < 0 or new_left < 0:
                raise PatchsetError(
                    f"{label}: line {header_at + 1}: hunk longer than its header says"
                )
            i += 1
        while i < len(lines) and lines[i].startswith("\\"):
            i += 1
    return i
