"""Match a server's host key against OpenSSH known_hosts text, as OpenSSH does.

Pure (text in, verdict out); transport/ssh.py reads the files. Paramiko parses each line
(`HostKeyEntry.from_line`) and hashes names (`HostKeys.hash_host`); the matching is ours
because Paramiko's `HostKeys` keeps one key per type and host, skips `@revoked` lines and
knows no `*`/`?`/`!` patterns, while OpenSSH accepts a key listed in ANY of its files.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
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


@dataclass(frozen=True)
class _Line:
    """One host-key line: where it is, whether it is @revoked, its names, its key fields."""

    lineno: int
    revoked: bool
    patterns: tuple[str, ...]
    key_fields: str  # "names keytype base64", as HostKeyEntry.from_line reads it


class KnownHostsFile:
    """A known_hosts file read once for a whole fleet.

    Every host's connect asks the same files, and a fleet's files list every host, so a scan
    per host grew as hosts² (1,000 plain lines: 3.4 s of controller CPU for 1,000 hosts).
    Lines whose names are all plain are indexed by lowercased name; the others (hashed,
    patterns, negations) are matched per lookup. A salted hashed name cannot be indexed, so
    it stays one HMAC per line and host, as in OpenSSH, with the salt and digest decoded
    once: ≈ 3 µs a line here, against ≈ 8 µs through Paramiko's `hash_host`.
    """

    def __init__(self, text: str, source: str):
        self.source = source
        self._by_name: dict[str, list[_Line]] = {}
        self._scanned: list[tuple[_Line, list[_Matcher]]] = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            fields = raw.split()
            if not fields or fields[0].startswith("#"):
                continue
            marker = fields.pop(0) if fields[0].startswith("@") else None
            if marker not in (None, "@revoked") or not fields:
                continue
            patterns = tuple(fields[0].split(","))
            line = _Line(lineno, marker == "@revoked", patterns, " ".join(fields[:3]))
            if all(_is_plain(pattern) for pattern in patterns):
                for pattern in {p.lower() for p in patterns}:
                    self._by_name.setdefault(pattern, []).append(line)
            else:
                self._scanned.append((line, [_matcher(pattern) for pattern in patterns]))

    def keys_for(self, name: str) -> list[KnownKey]:
        """The keys the file lists for `name`, in line order.

        Hashed names (`|1|salt|hash`), patterns (`*`, `?`, negated `!`) and `@revoked` lines
        count; `@cert-authority` lines (host certificates) are skipped, as are keys Paramiko
        cannot read (OpenSSH skips those too).
        """
        lines = list(self._by_name.get(name.lower(), ()))
        lines += [line for line, matchers in self._scanned if _names_match(matchers, name)]
        lines.sort(key=lambda line: line.lineno)
        found = []
        for line in lines:
            try:
                entry = HostKeyEntry.from_line(line.key_fields, line.lineno)
            except (paramiko.SSHException, InvalidHostKey, ValueError):
                continue
            if entry is None or entry.key is None:
                continue
            found.append(KnownKey(entry.key, f"{self.source}:{line.lineno}", line.revoked))
        return found


# A name pattern's test: (negated, hashed (salt, digest) or None, wildcard regex or None).
_Matcher = tuple[bool, tuple[bytes, bytes] | None, re.Pattern[str] | None]


def _is_plain(pattern: str) -> bool:
    """A name that matches only itself (no `!`, no `*`/`?`, not hashed)."""
    return not pattern.startswith(("!", "|")) and "*" not in pattern and "?" not in pattern


def _matcher(pattern: str) -> _Matcher:
    negated = pattern.startswith("!")
    pattern = pattern.removeprefix("!")
    if pattern.startswith("|1|"):
        return (negated, _hashed(pattern), None)
    return (negated, None, _wildcard(pattern))


def _hashed(pattern: str) -> tuple[bytes, bytes]:
    """A hashed name's salt and HMAC-SHA1, decoded once (what Paramiko's `hash_host` does
    on each call; hashing a name is then one HMAC per line). Undecodable: an empty digest,
    which no HMAC-SHA1 equals."""
    try:
        _, _, salt, digest = pattern.split("|")
        return base64.b64decode(salt, validate=True), base64.b64decode(digest, validate=True)
    except (ValueError, binascii.Error):
        return (b"", b"")


def _names_match(matchers: Iterable[_Matcher], name: str) -> bool:
    """OpenSSH's rule: no negated pattern matches and at least one plain pattern does."""
    matched = False
    for negated, hashed, wildcard in matchers:
        if hashed is not None:
            salt, digest = hashed
            hit = hmac.compare_digest(hmac.digest(salt, name.encode(), "sha1"), digest)
        else:
            hit = wildcard is not None and wildcard.fullmatch(name.lower()) is not None
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
