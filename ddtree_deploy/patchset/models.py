"""Pydantic models of patchset.toml and patchset.lock.json."""

from __future__ import annotations

import re
from typing import Any, Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddtree_deploy.gate.settings import GateConfig

_SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
MAX_FILE_BYTES = 2 * 1024 * 1024
# 2: the lock records patchset.toml (`spec`, `spec_sha256`; patchset/spec_lock.py).
LOCK_VERSION = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def check_relative_path(value: str, what: str) -> str:
    """Refuse absolute paths, `..`, and odd characters; returns the path unchanged."""
    if value.startswith("/"):
        raise ValueError(f"{what} {value!r} is absolute; give it relative to site-packages")
    if ".." in value.split("/"):
        raise ValueError(f"{what} {value!r} contains '..' and could leave site-packages")
    if not _SAFE_PATH.match(value) or "//" in value or value.endswith("/"):
        raise ValueError(f"{what} {value!r} has characters outside [A-Za-z0-9_.-/]")
    return value


class Target(_Strict):
    package: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    version: str = Field(pattern=r"^[0-9][A-Za-z0-9.+\-]*$")


class FileEntry(_Strict):
    """One file the patchset owns: a new file of ours, or a diff against the base.

    `shared`: the source's bytes live once in the name's content-addressed store (under the
    lock's `source_sha256`) rather than in this version's folder; see `patchset/sources.py`.
    """

    path: str
    new: str | None = None
    patch: str | None = None
    shared: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return check_relative_path(value, "path")

    @field_validator("new", "patch")
    @classmethod
    def _source(cls, value: str | None) -> str | None:
        return None if value is None else check_relative_path(value, "source")

    @model_validator(mode="after")
    def _one_source(self) -> FileEntry:
        if (self.new is None) == (self.patch is None):
            raise ValueError(f"file {self.path!r}: give exactly one of 'new' or 'patch'")
        return self

    @property
    def kind(self) -> Literal["new", "patch"]:
        return "new" if self.new is not None else "patch"

    @property
    def source(self) -> str:
        source = self.new if self.new is not None else self.patch
        assert source is not None  # the validator above requires exactly one of new/patch
        return source


class SmokeConfig(_Strict):
    """Suites run after install (`suites`) and after the service is healthy again
    (`after_restart`, e.g. `server`, which asks the running server)."""

    suites: list[str] = ["integrity", "compile", "imports"]
    after_restart: list[str] = []
    timeout_s: float = Field(default=900.0, gt=0)
    # `imports`: the longest one module's import may take before it is killed and named.
    import_timeout_s: float = Field(default=300.0, gt=0)


_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Characters a server argument or env value may not hold: the serve file is a systemd
# EnvironmentFile whose SGLANG_ARGS is split on whitespace by `$SGLANG_ARGS` in ExecStart.
_UNSAFE_SERVE_CHARS = re.compile(r"[\s\"'\\$`]")
SERVE_ARGS_KEY = "SGLANG_ARGS"


def check_serve_token(value: str, what: str, empty_ok: bool = False) -> str:
    """Refuse a server argument or env value the serve file cannot carry; returns it."""
    bad = _UNSAFE_SERVE_CHARS.search(value)
    if bad or not (value or empty_ok):
        shown = repr(bad.group()) if bad else "an empty string"
        raise ValueError(f"{what} {value!r} holds {shown} (no whitespace, quotes, \\, $, `)")
    return value


def check_serve_env(env: dict[str, str], what: str) -> dict[str, str]:
    """Refuse env names that are not shell identifiers or that clash with SGLANG_ARGS."""
    for key, value in env.items():
        if not _ENV_KEY.match(key) or key == SERVE_ARGS_KEY:
            raise ValueError(f"{what} name {key!r} is not allowed (identifier, not SGLANG_ARGS)")
        check_serve_token(value, f"{what} {key}", empty_ok=True)
    return env


class ServeConfig(_Strict):
    """Server arguments and environment the patchset's code needs to run.

    A push writes them (merged with the host's own, see inventory `serve`) to the host's
    serve file (`service.args_file`), backed up and restored with the code, so a rollback
    restores the old flags too. `args` are `--flag [value]` tokens.
    """

    args: list[str] = Field(
        default=[], description="Server arguments: `--flag [value]` tokens, no spaces or quotes."
    )
    env: dict[str, str] = Field(default={}, description="Environment variables of the server.")

    @field_validator("args")
    @classmethod
    def _args(cls, value: list[str]) -> list[str]:
        if value and not value[0].startswith("--"):
            raise ValueError(f"serve.args must start with a --flag, got {value[0]!r}")
        return [check_serve_token(token, "serve argument") for token in value]

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return check_serve_env(value, "serve.env")


class LosslessPrompt(_Strict):
    """One prompt of the lossless check: token ids (exact) or text (tokenized by the server)."""

    input_ids: list[int] | None = Field(default=None, description="Token ids (exact).")
    text: str | None = Field(default=None, description="Text, tokenized by the server.")

    @model_validator(mode="after")
    def _one(self) -> LosslessPrompt:
        if (self.input_ids is None) == (self.text is None):
            raise ValueError("a prompt needs exactly one of 'input_ids' or 'text'")
        if self.input_ids is not None and not self.input_ids:
            raise ValueError("a prompt's input_ids must not be empty")
        return self


class LosslessConfig(_Strict):
    """The `server` suite's lossless gate: greedy output of the speculative server must equal
    the target's own greedy output token for token, for these prompts.

    `references` are JSON files (relative to the patchset dir) of the target's greedy outputs
    for known models, matched on the host by model fingerprint and dtype.
    """

    prompts: list[LosslessPrompt] = Field(min_length=1)
    max_new_tokens: int = Field(default=64, ge=1)
    concurrency: int = Field(default=8, ge=1)
    references: list[str] = []
    min_accept_length: float = Field(default=1.0, ge=0)

    @field_validator("references")
    @classmethod
    def _references(cls, value: list[str]) -> list[str]:
        return [check_relative_path(v, "reference") for v in value]


# What a patchset's name and version may be (also what `-p NAME@VERSION` accepts).
NAME_PATTERN = r"^[a-z0-9][a-z0-9_\-]*$"
VERSION_PATTERN = r"^[0-9]+\.[0-9]+\.[0-9]+([.\-+][A-Za-z0-9.]+)?$"


class PatchsetSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    version: str = Field(pattern=VERSION_PATTERN)
    description: str = ""
    # NAME@VERSION this patchset was ported from (`patchset port`): where its diffs came from.
    ported_from: str | None = None
    target: Target
    files: list[FileEntry] = Field(alias="file", min_length=1)
    smoke: SmokeConfig = SmokeConfig()
    serve: ServeConfig | None = None
    lossless: LosslessConfig | None = None
    # The serving gate's defaults for this patchset (docs/gate.md); `prompts` is a JSONL
    # file relative to the patchset dir, locked like the lossless references.
    gate: GateConfig | None = None

    @field_validator("gate")
    @classmethod
    def _gate(cls, value: GateConfig | None) -> GateConfig | None:
        if value is not None and value.prompts is not None:
            check_relative_path(value.prompts, "gate.prompts")
        return value

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        try:
            Version(value)  # `name` alone picks the highest version: it must be orderable
        except InvalidVersion:
            raise ValueError(f"{value!r} is not a PEP 440 version") from None
        return value

    @model_validator(mode="after")
    def _files(self) -> PatchsetSpec:
        seen: set[str] = set()
        for entry in self.files:
            if entry.path in seen:
                raise ValueError(f"file {entry.path!r} listed twice")
            if not entry.path.startswith(self.target.package + "/"):
                raise ValueError(
                    f"file {entry.path!r} is outside the target package {self.target.package!r}"
                )
            seen.add(entry.path)
        return self

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


class LockedFile(_Strict):
    kind: Literal["new", "patch"]
    source: str
    source_sha256: str
    base_sha256: str | None
    result_sha256: str


class PatchsetLock(_Strict):
    lock_version: int = LOCK_VERSION
    name: str
    version: str
    target: Target
    wheel: str
    files: dict[str, LockedFile]
    # sha256 of each data file the gates read ([lossless] references, [gate] prompts):
    # the gates' data is locked like the code.
    references: dict[str, str] = {}
    # patchset.toml as the lock pins it (spec_lock.lockable_spec) and its canonical sha256.
    # None only in a lock written before lock_version 2, which push and verify refuse.
    spec: dict[str, Any] | None = None
    spec_sha256: str | None = None
