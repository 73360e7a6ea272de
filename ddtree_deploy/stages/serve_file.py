"""The serve file: the server flags and environment a patchset needs, per host (pure).

A patchset that changes how SGLang must be launched (DDTree needs `--speculative-algorithm
DDTREE --speculative-ddtree-budget N`, which the pristine sglang rejects) declares them in
`[serve]`; the host's inventory adds its own (model path, port, draft model) in `serve`.
A push writes the merged result to `service.args_file` on the host, a systemd
EnvironmentFile:

    # written by ddtree-deploy for ddtree@1.1.0 (...)
    SGLANG_ARGS="--model-path /models/x --speculative-algorithm DDTREE ..."
    SGLANG_SOME_ENV="1"

A systemd unit reads it with `EnvironmentFile=<args_file>` and
`ExecStart=/usr/bin/python3 -m sglang.launch_server $SGLANG_ARGS` (an unbraced `$VAR` is
split on whitespace into arguments); a `command` service's start script reads the same
file. The file is backed up before and restored on rollback, byte for byte.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddtree_deploy.agent.host.wire_results import ServeFound
from ddtree_deploy.patchset.models import SERVE_ARGS_KEY

# Values never shown in plan/status/events: the api key flag and env names that look secret.
_SECRET_FLAGS = {"--api-key", "--admin-api-key"}
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
REDACTED = "***"


@dataclass(frozen=True)
class ServeFile:
    """One host's rendered serve file: its path on the host, flags, env and bytes."""

    path: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    content: bytes

    @property
    def sha256(self) -> str:
        """The hex sha256 of the file's bytes (what preflight compares with the host's)."""
        return hashlib.sha256(self.content).hexdigest()

    def flag(self, name: str) -> str | None:
        """Return the first value of flag `name` (e.g. "--port"), or None."""
        values = dict(split_flags(self.args)).get(name)
        return values[0] if values else None

    def describe(self) -> str:
        """One line for people: the redacted arguments and env names."""
        shown = " ".join(redact_args(self.args))
        env = " ".join(f"{k}={REDACTED if _SECRET_ENV.search(k) else v}" for k, v in self.env)
        return f"{self.path}: {shown}" + (f" | env {env}" if env else "")


def split_flags(args: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Return [(--flag, its values)] in order; a token not starting with `--` is a value of
    the flag before it. Raises ValueError if the first token is not a flag."""
    flags: list[tuple[str, list[str]]] = []
    for token in args:
        if token.startswith("--"):
            flags.append((token, []))
        elif not flags:
            raise ValueError(f"server arguments must start with a --flag, got {token!r}")
        else:
            flags[-1][1].append(token)
    return [(name, tuple(values)) for name, values in flags]


def merge_serve_args(patchset_args: Sequence[str], host_args: Sequence[str]) -> list[str]:
    """Return the host's flags in their order, then the patchset's flags the host lacks.

    A flag the host gives replaces the patchset's flag of the same name (all its values).
    """
    host = split_flags(host_args)
    given = {name for name, _ in host}
    merged = host + [(name, values) for name, values in split_flags(patchset_args)
                     if name not in given]  # fmt: skip
    return [token for name, values in merged for token in (name, *values)]


def render_serve_file(
    path: str,
    patchset_ref: str,
    patchset_args: Sequence[str],
    patchset_env: dict[str, str],
    host_args: Sequence[str],
    host_env: dict[str, str],
) -> ServeFile:
    """Return the serve file for one host (see the module docstring for the format)."""
    args = tuple(merge_serve_args(patchset_args, host_args))
    env = tuple(sorted({**patchset_env, **host_env}.items()))
    lines = [
        f"# Written by ddtree-deploy for {patchset_ref}; a rollback restores the previous file.",
        "# systemd: EnvironmentFile=<this file>, ExecStart=... -m sglang.launch_server "
        f"${SERVE_ARGS_KEY}",
        f'{SERVE_ARGS_KEY}="{" ".join(args)}"',
        *(f'{key}="{value}"' for key, value in env),
    ]
    return ServeFile(path, args, env, ("\n".join(lines) + "\n").encode())


def parse_serve_file(text: str) -> tuple[list[str], dict[str, str]]:
    """Return (arguments, env) of a serve file's text; comments and blank lines ignored.

    Reads what render_serve_file writes and plain `KEY=value` lines an operator wrote.
    """
    args: list[str] = []
    env: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key == SERVE_ARGS_KEY:
            args = value.split()
        else:
            env[key] = value
    return args, env


def redact_args(args: Sequence[str]) -> list[str]:
    """Return the arguments with the values of secret flags replaced by ***."""
    shown: list[str] = []
    for name, values in split_flags(args) if args and args[0].startswith("--") else []:
        shown += [name, *((REDACTED,) * len(values) if name in _SECRET_FLAGS else values)]
    return shown


def summarize_flags(args: Sequence[str]) -> str:
    """A few words for a table: the speculative algorithm and budget, or none."""
    flags = dict(split_flags(args)) if args and args[0].startswith("--") else {}
    algorithm = (flags.get("--speculative-algorithm") or ("",))[0]
    if not algorithm:
        return "no speculative decoding"
    budget = (flags.get("--speculative-ddtree-budget") or ("",))[0]
    return f"{algorithm} budget {budget}" if budget else algorithm


def diff_flags(old_args: Sequence[str], new_args: Sequence[str]) -> list[str]:
    """What changes from old to new, flag by flag: `--x a -> b`, `+ --y 8`, `- --z 4`."""
    old = dict(split_flags(old_args)) if old_args and old_args[0].startswith("--") else {}
    new = dict(split_flags(new_args)) if new_args and new_args[0].startswith("--") else {}
    changes = []
    for name, values in new.items():
        if name not in old:
            changes.append(" ".join(["+", name, *values]))
        elif old[name] != values:
            changes.append(f"{name} {' '.join(old[name])} -> {' '.join(values)}")
    changes += [" ".join(["-", name, *values]) for name, values in old.items() if name not in new]
    return changes


def describe_serve_text(path: str, text: str | None) -> str:
    """One redacted line for a serve file as found on a host (or its absence)."""
    if text is None:
        return f"{path}: (absent)"
    args, env = parse_serve_file(text)
    shown = ServeFile(path, tuple(args), tuple(sorted(env.items())), b"")
    return shown.describe()


@dataclass(frozen=True)
class ServeFact:
    """The host's serve file as the controller shows it: never its raw text (it may hold an
    api key).

    flags: one redacted line, or `PATH: (absent)`; args: the arguments with secret values
    replaced by ***; path, sha256 and error as the facts op found them.
    """

    path: str
    sha256: str | None
    flags: str
    args: tuple[str, ...]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the fact as JSON: path, sha256, error (only when set), flags, args."""
        shown: dict[str, Any] = {"path": self.path, "sha256": self.sha256}
        if self.error is not None:
            shown["error"] = self.error
        return shown | {"flags": self.flags, "args": list(self.args)}


def describe_serve_fact(found: ServeFound) -> ServeFact:
    """Return the host's serve file as found (the facts op's ServeFound), without its raw
    text: redacted `flags` and `args` instead."""
    text = found.text
    return ServeFact(
        path=found.path,
        sha256=found.sha256,
        flags=describe_serve_text(found.path, text),
        args=tuple(redact_args(parse_serve_file(text)[0])) if text else (),
        error=found.error,
    )
