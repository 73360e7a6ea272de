"""Pydantic models of patchset.toml and patchset.lock.json."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
MAX_FILE_BYTES = 2 * 1024 * 1024
LOCK_VERSION = 1


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
    """One file the patchset owns: a new file of ours, or a diff against the base."""

    path: str
    new: str | None = None
    patch: str | None = None

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
        return self.new if self.new is not None else self.patch  # type: ignore[return-value]


class SmokeConfig(_Strict):
    """Suites run after install (`suites`) and after the service is healthy again
    (`after_restart`, e.g. `server`, which asks the running server)."""

    suites: list[str] = ["integrity", "compile", "imports"]
    after_restart: list[str] = []
    timeout_s: float = Field(default=900.0, gt=0)


class PatchsetSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    version: str = Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+([.\-+][A-Za-z0-9.]+)?$")
    description: str = ""
    target: Target
    files: list[FileEntry] = Field(alias="file", min_length=1)
    smoke: SmokeConfig = SmokeConfig()

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
