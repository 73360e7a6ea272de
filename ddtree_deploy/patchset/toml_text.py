"""Write the TOML of a patchset.toml from plain data (tomllib reads TOML but cannot write it).

Only what a patchset spec holds: top-level keys, tables, arrays of tables (`[[file]]`), and
values that are strings, booleans, numbers, lists of them and inline tables. The text is read
back with tomllib and compared before it is returned, so a value this writer gets wrong is an
error here, never a spec that means something else.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from typing import Any

from ddtree_deploy.errors import PatchsetError


def dump_toml(data: Mapping[str, Any]) -> str:
    """Return `data` as TOML: scalars first, then each table, then each array of tables.

    Raises PatchsetError for a value of another type, or text that tomllib reads back as
    something other than `data`.
    """
    head: list[str] = []
    tables: list[str] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            tables.append(f"\n[{_key(key)}]\n" + _pairs(value))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            tables.extend(f"\n[[{_key(key)}]]\n" + _pairs(item) for item in value)
        else:
            head.append(f"{_key(key)} = {_value(value)}\n")
    text = "".join(head) + "".join(tables)
    if tomllib.loads(text) != data:
        raise PatchsetError("patchset.toml: the spec written does not read back the same")
    return text


def _pairs(table: Mapping[str, Any]) -> str:
    return "".join(f"{_key(key)} = {_value(value)}\n" for key, value in table.items())


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # 1.5, 1e-05, inf: all TOML floats
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise PatchsetError(f"patchset.toml: cannot write a {type(value).__name__} value")
