"""Match a server's host key against OpenSSH known_hosts text, as OpenSSH does.

Pure (text in, verdict out); transport/ssh.py reads the files. Paramiko parses each line
(`HostKeyEntry.from_line`) and hashes names (`HostKeys.hash_host`); the matching is ours
because Paramiko's `HostKeys` keeps one key per type and host, skips `@revoked` lines and
knows no `*`/`?`/`!` patterns, while OpenSSH accepts a key listed in ANY of its files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

# The host key algorithms that sign with each key type (RSA keys sign with SHA-2 too).
_ALGORITHMS_OF_TYPE = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}


@dataclass(frozen=True)
class KnownKey:
    """One known_hosts line that names the host: its key, where it is, and its marker."""

    key: paramiko.PKey
    where: str  # FILE:LINE
    revoked: bool = False


@dataclass(frozen=True)
class KeyVerdict:
    """ok: a listed key matched; unknown: no key of the server's type is listed; changed: a
    different key of that type is (`expected` is it); revoked: the key is marked @revoked."""

    status: Literal["ok", "unknown", "changed", "revoked"]
    expected: KnownKey | None = None


def known_name(hostname: str, port: int) -> str:
    """The name known_hosts lists a host under: `host` on port 22, else `[host]:port`."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    """The key's fingerprint as OpenSSH prints it: SHA256:base64-without-padding."""
    return str(key.fingerprint)


def find_known_keys(text: str, source: str, name: str) -> list[KnownKey]:
    """The keys `text` (a known_hosts file named `source`) lists for `name`.

    Hashed names (`|1|salt|hash`), patterns (`*`, `?`, negated `!`) and `@revoked` lines
    count; `@cert-authority` lines (host certificates) are skipped, as are lines Paramiko
    cannot read (OpenSSH skips those too).
    """
    found = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if marker not in (None, "@revoked") or not fields:
            continue
        # names first: decoding a key costs far more, and a fleet's known_hosts lists every
        # host, so decoding each line for each host grew as hosts² (bench B, issue 19)
        if not _names_match(fields[0].split(","), name):
            continue
        try:
            entry = HostKeyEntry.from_line(" ".join(fields[:3]), lineno)
        except (paramiko.SSHException, InvalidHostKey, ValueError):
            continue
        if entry is None or entry.key is None:
            continue
        found.append(KnownKey(entry.key, f"{source}:{lineno}", revoked=marker == "@revoked"))
    return found


def _names_match(patterns: Iterable[str], name: str) -> bool:
    """OpenSSH's rule: no negated pattern matches and at least one plain pattern does."""
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!")
        if pattern.startswith("|1|"):
            hit = paramiko.HostKeys.hash_host(name, pattern) == pattern
        else:
            hit = _wildcard(pattern).fullmatch(name.lower()) is not None
        if hit and negated:
            return False
        matched = matched or hit
    return matched


@functools.lru_cache(maxsize=4096)
def _wildcard(pattern: str) -> re.Pattern[str]:
    """OpenSSH's patterns: `*` and `?` only (`[host]:port` brackets are literal)."""
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts).lower())


def judge_key(known: Sequence[KnownKey], server_key: paramiko.PKey) -> KeyVerdict:
    """The verdict on `server_key` given every known key of the host (all files)."""
    same = [k for k in known if k.key.asbytes() == server_key.asbytes()]
    revoked = next((k for k in same if k.revoked), None)
    if revoked is not None:
        return KeyVerdict("revoked", revoked)
    if same:
        return KeyVerdict("ok", same[0])
    other = next(
        (k for k in known if not k.revoked and k.key.get_name() == server_key.get_name()), None
    )
    return KeyVerdict("changed", other) if other is not None else KeyVerdict("unknown")


def preferred_algorithms(known: Sequence[KnownKey], offered: Sequence[str]) -> list[str]:
    """`offered` host key algorithms, those of the known keys' types first (as OpenSSH
    orders HostKeyAlgorithms), so a host with a known ed25519 key is asked for that one."""
    first: list[str] = []
    for key in known:
        if key.revoked:
            continue
        kind = key.key.get_name()
        for algorithm in _ALGORITHMS_OF_TYPE.get(kind, (kind,)):
            if algorithm in offered and algorithm not in first:
                first.append(algorithm)
    return first + [a for a in offered if a not in first]
