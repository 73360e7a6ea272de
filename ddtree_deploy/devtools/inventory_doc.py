"""Write docs/inventory.md from the inventory's pydantic models:
`python -m ddtree_deploy.devtools.inventory_doc` (`--check`: exit 1 when the file is stale).

Every key's name, type (with its bounds), default and description comes from the models'
fields (`Field(description=...)`), so the page cannot drift from what the loader accepts;
tests/devtools/test_inventory_doc.py regenerates it in memory and compares. The gate's
keys are all optional in the model (tables merge key by key); their defaults are read from
the resolved settings (gate/settings.py's GateSettings and Thresholds).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ddtree_deploy.gate.settings import GateConfig, GateSettings, Thresholds
from ddtree_deploy.inventory.models import Host, RestartGroup, SmokeSpec
from ddtree_deploy.inventory.service import DrainSpec, HooksSpec, ServiceSpec
from ddtree_deploy.patchset.models import LosslessPrompt, ServeConfig

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "inventory.md"
FIX_COMMAND = "python -m ddtree_deploy.devtools.inventory_doc"
# Fields the loader sets, never written in an inventory file.
LOADER_FIELDS = {"name", "jump_hosts", "gate_prompts"}
# Models shown as their own section: the type column names the section.
SECTIONS: dict[type[BaseModel], str] = {
    ServiceSpec: "service",
    DrainSpec: "service.drain",
    HooksSpec: "hooks",
    SmokeSpec: "smoke",
    ServeConfig: "serve",
    GateConfig: "gate",
    LosslessPrompt: "smoke.lossless_prompts",
}

INTRO = f"""\
# Inventory keys

<!-- Generated from the pydantic models by `{FIX_COMMAND}`: do not edit by hand. -->

An inventory is one TOML file: `--inventory/-i FILE`, else `$DDTREE_DEPLOY_INVENTORY`, else
`inventories/default.toml`. `inventories/example.toml` shows every key in use (ct129 is the
example host); docs/quickstart.md walks through a first one. Unknown keys and bad values are
refused (exit 2, naming file, host and key) before any host is contacted.

Top-level tables:

- `[defaults]`: any host key below; applies to every host. A host's own table overrides it
  key by key, and the sub-tables `service`, `smoke`, `serve` and `hooks` merge key by key
  too. `[defaults]` may not set `address`. Each `[[hosts.NAME.services]]` entry merges over
  `[defaults.service]`.
- `[hosts.NAME]`: one host; NAME is how commands (`-H NAME`) and events name it. `address`
  is required.
- `[groups.NAME]`: a group's `gate` table (merged over `[defaults.gate]`, in the host's
  `groups` order, under `[hosts.NAME.gate]`), and, with `members` and `leader`, a restart
  group (a multi-node server that changes and restarts as one).

Types: `str?` may be left unset (the default then says what happens); `≥`, `>`, `≤`, `<` are
the bounds the loader checks.
"""


def render_inventory_doc() -> str:
    """Return the Markdown of docs/inventory.md (pure: the same models, the same text)."""
    parts = [INTRO]
    parts.append(_section("Host keys: `[hosts.NAME]`, `[defaults]`", Host, LOADER_FIELDS))
    parts.append(
        _section(
            "`[hosts.NAME.service]`, `[[hosts.NAME.services]]`",
            ServiceSpec,
            note='The host\'s server and how it restarts. `kind = "systemd"` needs `unit`; '
            '`kind = "command"` needs `start` and `stop`. Several servers: one '
            "`[[hosts.NAME.services]]` table each, all with the same `args_file`.",
        )
    )
    parts.append(_section("`service.drain`", DrainSpec))
    parts.append(_section("`[hosts.NAME.hooks]`", HooksSpec))
    parts.append(_section("`[hosts.NAME.smoke]`", SmokeSpec))
    parts.append(
        _section(
            "`smoke.lossless_prompts` entries",
            LosslessPrompt,
            note="Exactly one of the two keys per prompt.",
        )
    )
    parts.append(
        _section(
            "`[hosts.NAME.serve]`",
            ServeConfig,
            note="Merged with the patchset's `[serve]`: a flag or env name given here replaces "
            "the patchset's, the rest of the patchset's is added after these; the result is "
            "written to `service.args_file` (docs/service.md).",
        )
    )
    parts.append(
        _section(
            "`[hosts.NAME.gate]`, `[groups.NAME.gate]`, `[defaults.gate]`",
            GateConfig,
            note="The serving gate (docs/gate.md). Every key is optional; the default column "
            "is the built-in value used when no table sets the key.",
            defaults=_gate_defaults(),
        )
    )
    parts.append(
        _section(
            "Restart groups: `[groups.NAME]` with `members`",
            RestartGroup,
            {"name"},
            note="A push, rollback or recover of some members alone is refused (exit 2) "
            "unless `--ignore-groups` (docs/service.md, Restart groups).",
        )
    )
    return "\n".join(parts)


def _section(
    title: str,
    model: type[BaseModel],
    skipped: set[str] | None = None,
    note: str = "",
    defaults: dict[str, object] | None = None,
) -> str:
    """One `##` section: the model's docstring's first paragraph, a note, the key table."""
    lines = [f"## {title}", ""]
    summary = (model.__doc__ or "").strip().split("\n\n")[0]
    if summary:
        lines += [" ".join(summary.split()), ""]
    if note:
        lines += [note, ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in (skipped or set()):
            continue
        if not field.description:
            raise ValueError(f"{model.__name__}.{name} has no description= to document")
        default = (defaults or {}).get(name, _default_of(field))
        type_text = _type_text(field.annotation) + _bounds(field)
        row = [f"`{name}`", type_text, default, field.description]
        lines.append("| " + " | ".join(_cell(str(cell)) for cell in row) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _default_of(field: FieldInfo) -> str:
    """The default as TOML would write it; `required` or `unset` when there is none."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    return _toml_value(value)


def _toml_value(value: object) -> str:
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, BaseModel):
        return "table"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | int | float):
        return f"`{json.dumps(value)}`"
    if isinstance(value, tuple | list):
        return f"`{json.dumps(list(value), ensure_ascii=False)}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{json.dumps(value)}`"
    raise TypeError(f"no TOML form for default {value!r}")


def _gate_defaults() -> dict[str, object]:
    """The built-in value of each [gate] key: resolve()'s mode, GateSettings, Thresholds."""
    found: dict[str, object] = {"mode": '`"full"`', "prompts": "the patchset's"}
    for cls in (GateSettings, Thresholds):
        for item in dataclasses.fields(cls):
            if item.default is not dataclasses.MISSING and item.name in GateConfig.model_fields:
                found[item.name] = _toml_value(item.default)
    found.setdefault("metrics", "`[]`")
    return found


def _bounds(field: FieldInfo) -> str:
    """The field's checked bounds and pattern, as ` ≥ 0`, ` 1-65535`, ` (pattern)`."""
    marks = []
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Ge):
            marks.append(f"≥ {meta.ge}")
        elif isinstance(meta, annotated_types.Gt):
            marks.append(f"> {meta.gt}")
        elif isinstance(meta, annotated_types.Le):
            marks.append(f"≤ {meta.le}")
        elif isinstance(meta, annotated_types.Lt):
            marks.append(f"< {meta.lt}")
        elif isinstance(meta, annotated_types.MinLen):
            marks.append(f"at least {meta.min_length}")
        elif getattr(meta, "pattern", None):
            marks.append(f"matching `{meta.pattern}`")
    return f", {', '.join(marks)}" if marks else ""


def _type_text(annotation: object) -> str:
    """A type as a reader of TOML sees it: str, int, "a" | "b", list of str, table (smoke)."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        inner = " or ".join(_type_text(a) for a in kept)
        return f"{inner}?" if len(kept) < len(args) else inner
    if origin is typing.Literal:
        return " | ".join(f'`"{a}"`' for a in args)
    if origin in (list, tuple):
        item = args[0] if args else object
        return f"list of {_type_text(item)}"
    if origin is dict:
        return f"table of {_type_text(args[1])}" if len(args) == 2 else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        section = next((s for cls, s in SECTIONS.items() if issubclass(annotation, cls)), None)
        return f"table ({section})" if section else "table"
    if annotation is object:
        return "value"
    return getattr(annotation, "__name__", str(annotation))


def _changed_paths() -> Iterator[str]:
    if not DOC_PATH.is_file() or DOC_PATH.read_text(encoding="utf-8") != render_inventory_doc():
        yield str(DOC_PATH)


def main(argv: list[str]) -> int:
    """Write the page (or, with --check, exit 1 when it differs from the models)."""
    if argv[:1] == ["--check"]:
        stale = list(_changed_paths())
        for path in stale:
            print(f"{path} is stale: run `{FIX_COMMAND}`", file=sys.stderr)
        return 1 if stale else 0
    DOC_PATH.write_text(render_inventory_doc(), encoding="utf-8")
    print(f"wrote {DOC_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
