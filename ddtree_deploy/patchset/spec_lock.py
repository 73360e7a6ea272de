"""The lock's record of patchset.toml: what it pins, its sha256, and how a changed spec differs.

A push depends on more than the files: `[serve]` writes the server's flags, `[smoke]`,
`[lossless]` and `[gate]` choose and tune the gates that guard it, `[target]` and `[[file]]`
say what is installed where. So the lock records the parsed patchset.toml (`spec`) and the
sha256 of its canonical JSON (`spec_sha256`: keys sorted, no whitespace, UTF-8), and every
push and verify compares them with the spec on disk. Comments, layout and key order are
not locked (they change nothing); neither are these keys, which change no push:

- `description`: free text shown by `patchset list`, read by nothing else;
- each `[[file]]`'s `shared`: where the source's bytes are kept (the version's folder or the
  name's store). The bytes themselves are pinned by the entry's `source_sha256` either way,
  and `patchset dedupe` and `copy_version` flip the flag without touching the lock.

The record is the spec *as written*, not the model with its defaults filled in, so a new
optional key in the models (a later release of this tool) leaves every old lock valid.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

UNLOCKED_KEYS = frozenset({"description"})
UNLOCKED_FILE_KEYS = frozenset({"shared"})
SHOWN_CHARS = 120  # a value in an error line is cut after this many characters


def lockable_spec(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return the parsed patchset.toml ``data`` as the lock records it: a JSON-shaped copy
    without `UNLOCKED_KEYS` and each `[[file]]`'s `UNLOCKED_FILE_KEYS` (see the module)."""
    spec = {k: v for k, v in data.items() if k not in UNLOCKED_KEYS}
    files = spec.get("file")
    if isinstance(files, list):
        spec["file"] = [_locked_entry(f) for f in files]
    # Round trip through JSON: the record holds exactly what the lock file will hold.
    loaded: dict[str, Any] = json.loads(canonical_json(spec))
    return loaded


def _locked_entry(entry: object) -> object:
    if not isinstance(entry, dict):
        return entry
    return {k: v for k, v in entry.items() if k not in UNLOCKED_FILE_KEYS}


def canonical_json(value: object) -> str:
    """Return ``value`` as canonical JSON: keys sorted, no whitespace, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_digest(spec: Mapping[str, Any]) -> str:
    """Return the sha256 (hex) of ``spec``'s canonical JSON (the lock's `spec_sha256`)."""
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()


def spec_differences(locked: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Return one line per key whose value differs between the ``locked`` record and the
    spec ``now`` (both from `lockable_spec`), naming its table and key, e.g.
    ``[serve] args: lock [...], now [...]``; empty when they are equal."""
    found: list[str] = []
    for key in sorted(set(locked) | set(now)):
        old, new = locked.get(key, _ABSENT), now.get(key, _ABSENT)
        if old == new:
            continue
        if key == "file" and isinstance(old, list) and isinstance(new, list):
            found += _file_differences(old, new)
        elif isinstance(old, dict) and isinstance(new, dict):
            found += _table_differences(f"[{key}]", old, new)
        elif isinstance(old, dict) or isinstance(new, dict):
            found.append(f"[{key}]: {_changed(old, new)}")
        else:
            found.append(f"key {key!r}: {_changed(old, new)}")
    return found


def _table_differences(table: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Lines for the keys of one table (sub-tables named `[a.b]`)."""
    found: list[str] = []
    for key in sorted(set(old) | set(new)):
        was, now = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            found += _table_differences(f"{table[:-1]}.{key}]", was, now)
        else:
            found.append(f"{table} {key}: {_changed(was, now)}")
    return found


def _file_differences(old: list[Any], new: list[Any]) -> list[str]:
    """Lines for the `[[file]]` entries, numbered from 1 as they appear in the file."""
    found: list[str] = []
    for index in range(max(len(old), len(new))):
        was = old[index] if index < len(old) else _ABSENT
        now = new[index] if index < len(new) else _ABSENT
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            found += _table_differences(f"[[file]] #{index + 1}", was, now)
        else:
            found.append(f"[[file]] #{index + 1}: {_changed(was, now)}")
    return found


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def _changed(old: object, new: object) -> str:
    return f"lock {_shown(old)}, now {_shown(new)}"


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, _Absent) else canonical_json(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."
