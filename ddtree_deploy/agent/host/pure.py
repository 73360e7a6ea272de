"""Hashes, file classification, the backups a prune removes and the strict unified-diff
applier: the code the controller and the host share, so both compute a patched file's bytes
(the lock) and a prune's choice (`backups prune --dry-run`) the same way."""

import hashlib
import re
from typing import Collection, List, Optional, Sequence, Tuple

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def sha256_bytes(data: bytes) -> str:
    """Return the sha256 hex digest of `data` (bytes)."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    """Return the sha256 hex digest of the file at `path`, or None when it does not exist.

    Raises OSError for any other read error (a directory, no permission).
    """
    try:
        with open(path, "rb") as fh:
            return sha256_bytes(fh.read())
    except FileNotFoundError:
        return None


def classify_file(
    current: Optional[str], base: Optional[str], result: str, upgrades: Sequence[str] = ()
) -> str:
    """Return where one file stands, from sha256 hex digests (`current` None = absent).

    "unchanged" (at result), "pending" (at the pinned base), "upgrade" (at another locked
    version's result) or "drifted" (anything else).
    """
    if current == result:
        return "unchanged"
    if current == base:
        return "pending"
    if current in upgrades:
        return "upgrade"
    return "drifted"


def split_backups(
    backup_ids: Sequence[str], installing_ids: Collection[str], keep: int
) -> Tuple[List[str], List[str]]:
    """Return (removed, kept): which of `backup_ids` (oldest first) a prune keeping the
    newest `keep` removes, and the rest in order. A backup whose deploy is in
    `installing_ids` (still `installing`: recover needs it) is never removed nor counted."""
    removable = [b for b in backup_ids if b not in installing_ids]
    removed = removable[: max(0, len(removable) - int(keep))]
    return removed, [b for b in backup_ids if b not in removed]


def apply_unified_diff(base_text: str, diff_text: str) -> str:
    """Return `base_text` with a one-file unified diff applied exactly: no fuzz, no offset.

    Every hunk's line counts must match its header (`@@ -a,b +c,d @@`), so a truncated diff
    is refused. Raises ValueError saying which diff or base line is wrong.
    """
    old = base_text.splitlines(keepends=True)
    lines = diff_text.splitlines(keepends=True)
    out, pos, i = [], 0, 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    if i == len(lines):
        raise ValueError("diff has no hunks")
    while i < len(lines):
        match = _HUNK.match(lines[i])
        if not match:
            raise ValueError("diff line %d: expected a hunk header, got %r" % (i + 1, lines[i]))
        start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
        if start < pos:
            raise ValueError("diff line %d: hunks overlap or are out of order" % (i + 1))
        out.extend(old[pos:start])
        pos, header_at = start, i
        i = _apply_hunk(old, lines, i + 1, out, pos)
        pos += _check_counts(match, lines, header_at, i)
    out.extend(old[pos:])
    return "".join(out)


def _apply_hunk(old, lines, i, out, pos):
    """Apply the hunk body starting at diff line index `i` to `out`, reading `old` from
    `pos`; return the index of the next hunk header (or the end). Raises ValueError."""
    prev = ""
    while i < len(lines) and not lines[i].startswith("@@"):
        line = lines[i]
        tag, body = line[:1], line[1:]
        if tag == "\\":  # "\ No newline at end of file" applies to the previous line
            if prev in (" ", "+") and out:
                out[-1] = out[-1].rstrip("\r\n")
        elif tag in (" ", "-"):
            if pos >= len(old) or old[pos].rstrip("\r\n") != body.rstrip("\r\n"):
                got = old[pos] if pos < len(old) else "<end of file>"
                raise ValueError(
                    "does not apply at base line %d: expected %r, found %r"
                    % (pos + 1, body.rstrip(), got.rstrip())
                )
            if tag == " ":
                out.append(old[pos])
            pos += 1
        elif tag == "+":
            out.append(body if body.endswith("\n") else body + "\n")
        elif line.strip():
            raise ValueError("diff line %d: unexpected %r" % (i + 1, line.rstrip()))
        prev = tag
        i += 1
    return i


def _check_counts(match, lines, header_at, end):
    """Return the hunk's old-line count after checking both counts against its header.

    Raises ValueError (a truncated or hand-edited diff) when they differ.
    """
    old_count = sum(1 for ln in lines[header_at + 1 : end] if ln[:1] in (" ", "-"))
    new_count = sum(1 for ln in lines[header_at + 1 : end] if ln[:1] in (" ", "+"))
    old_want = int(match.group(2)) if match.group(2) is not None else 1
    new_want = int(match.group(4)) if match.group(4) is not None else 1
    if (old_count, new_count) != (old_want, new_want):
        raise ValueError(
            "diff line %d: hunk header says %d old and %d new lines, the hunk has %d and %d "
            "(truncated diff?)" % (header_at + 1, old_want, new_want, old_count, new_count)
        )
    return old_count
