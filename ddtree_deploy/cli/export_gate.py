"""`export --verify --verify-serve-args`: the serving gate's settings (image vs base).

As a push's: the patchset's [gate] table over the built-in defaults, then (like an
inventory's [defaults.gate]) the [gate] table of --verify-gate-config over it; the prompts
are that file's, else the patchset's ([gate] prompts, else its [lossless] prompts). The
mode is --verify-gate (quick by default: the push's `--gate quick`). Every problem is bad
input (ConfigError, exit 2), found before anything is built.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from ddtree_deploy.errors import ConfigError

if TYPE_CHECKING:
    from ddtree_deploy.gate.prompts import Prompt
    from ddtree_deploy.gate.settings import GateConfig, GateMode, GateSettings
    from ddtree_deploy.stages import PreparedPatchset

MODES: dict[str, GateMode | None] = {"quick": "quick", "full": "full", "off": None}


def verify_gate_settings(
    prepared: PreparedPatchset, mode: str, config_file: Path | None, serves: bool
) -> GateSettings | None:
    """The serving gate of `export --verify`, None when it does not run (--verify-gate
    off, or no server: `serves` false). Raises ConfigError."""
    from ddtree_deploy.gate.settings import GateConfig, resolve

    if mode not in MODES:
        raise ConfigError(f"--verify-gate {mode!r}: expected one of {', '.join(MODES)}")
    chosen = MODES[mode]
    if config_file is not None and (chosen is None or not serves):
        raise ConfigError(
            "--verify-gate-config: only with --verify-serve-args and --verify-gate quick|full "
            "(the gate compares the image's server with the base image's)"
        )
    if chosen is None or not serves:
        return None
    config = prepared.gate.over(GateConfig()) if prepared.gate else GateConfig()
    prompts = prepared.gate_prompts
    if config_file is not None:
        table, own = read_gate_config(config_file)
        config, prompts = table.over(config), own or prompts
    if not prompts:
        raise ConfigError(
            f"--verify-gate {mode}: the serving gate has no prompts: give `prompts` (a JSONL "
            "file) in the [gate] of --verify-gate-config, or [gate]/[lossless] prompts in "
            "the patchset (or --verify-gate off)"
        )
    return resolve(config, prompts, chosen)


def read_gate_config(path: Path) -> tuple[GateConfig, tuple[Prompt, ...]]:
    """The [gate] table of the TOML file at `path` and its prompts (read from the JSONL
    file it names, relative to `path`'s dir; () when it names none). Raises ConfigError
    naming the file and the problem."""
    from pydantic import ValidationError

    from ddtree_deploy.gate.prompts import read_prompts
    from ddtree_deploy.gate.settings import GateConfig

    where = f"--verify-gate-config {path}"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if set(document) != {"gate"} or not isinstance(document["gate"], dict):
        raise ConfigError(f"{where}: expected one [gate] table (and nothing else)")
    try:
        table = GateConfig.model_validate(document["gate"])
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(["gate", *(str(p) for p in err["loc"])])
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{where}: unknown key {key!r}") from None
        raise ConfigError(f"{where}: key {key!r}: {err['msg']}") from None
    if table.prompts is None:
        return table, ()
    try:
        return table, read_prompts(path.parent / table.prompts)
    except ValueError as exc:
        raise ConfigError(f"{where}: key 'gate.prompts': {exc}") from None
