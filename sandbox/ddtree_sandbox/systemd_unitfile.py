"""Unit files as systemd reads them, for the sandbox's systemd TEST STAND-IN (stdlib only).

Part of ``systemd_standin.py`` (see there), copied onto systemd sandbox hosts beside it:
``[Service]`` Type=simple|exec, ExecStart= (``$VAR`` split on whitespace, ``${VAR}`` one word,
``$$``, quotes, ``%n %N %i %%``), Environment=, EnvironmentFile= (``-``: may be missing),
WorkingDirectory=, Restart=, RestartSec=, TimeoutStopSec=; ``[Unit]`` StartLimitBurst=,
StartLimitIntervalSec=. Other keys are ignored, as systemd ignores unknown ones (warning).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

# units/, run/ and journal/ live here: beside the copied files on a host, or where the
# tests say.
ROOT = Path(os.environ.get("DDTREE_SYSTEMD_STANDIN_ROOT") or Path(__file__).resolve().parent)
SUPPORTED_TYPES = ("simple", "exec")
RESTART_VALUES = ("no", "on-success", "on-failure", "on-abnormal", "on-abort", "always")
DEFAULT_RESTART_S = 0.1
DEFAULT_STOP_S = 90.0
DEFAULT_BURST = 5
DEFAULT_INTERVAL_S = 10.0


class UnitError(Exception):
    """A unit that cannot be loaded or started; the message is what systemctl prints."""


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Return {section: {key: [values in order]}} of a unit file: comments (# ;), blank
    lines and backslash continuations as systemd reads them. An empty assignment resets the
    key's list (``ExecStart=`` then ``ExecStart=...``)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None or "=" not in line:
            raise UnitError(f"cannot parse line {raw!r}")
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if value:
            current.setdefault(key, []).append(value)
        else:
            current[key] = []
    return sections


def split_words(text: str) -> list[str]:
    """Split on whitespace honouring "..." and '...' quotes and backslash escapes."""
    words: list[str] = []
    word, quote, started, i = "", "", False, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            word, started, i = word + text[i + 1], True, i + 2
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                word += char
        elif char in "\"'":
            quote, started = char, True
        elif char.isspace():
            if started:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + char, True
        i += 1
    if quote:
        raise UnitError(f"unbalanced quotes in {text!r}")
    if started:
        words.append(word)
    return words


def read_environment_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines of an EnvironmentFile: comments (# ;) skipped, one pair of
    surrounding quotes stripped, backslash continuations joined."""
    env: dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key] = value
    return env


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_command(words: list[str], env: dict[str, str]) -> list[str]:
    """ExecStart's variable expansion: a word that is exactly ``$VAR`` becomes the value's
    whitespace-separated words (none when unset or empty); ``${VAR}`` (or ``$VAR`` inside
    a longer word) is replaced in place, the word staying one argument; ``$$`` is "$"."""
    argv: list[str] = []
    for word in words:
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv.extend(env.get(whole.group(1), "").split())
            continue
        argv.append(_VAR.sub(lambda m: _value(m, env), word))
    return argv


def _value(match: re.Match[str], env: dict[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    return env.get(match.group(1) or match.group(2), "")


def resolve_specifiers(text: str, unit: str) -> str:
    """Replace %n (unit name), %N (without suffix), %i (instance) and %%; refuse others."""
    stem = unit.rsplit(".", 1)[0]
    instance = stem.partition("@")[2]
    table = {"n": unit, "N": stem, "i": instance, "%": "%"}

    def one(match: re.Match[str]) -> str:
        if match.group(1) not in table:
            raise UnitError(f"failed to resolve specifier %{match.group(1)} in {text!r}")
        return table[match.group(1)]

    return re.sub(r"%(.)", one, text)


def parse_seconds(text: str) -> float:
    """A systemd time span: "5", "5s", "100ms", "1min 30s"; raise UnitError otherwise."""
    units = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "min": 60.0, "m": 60.0, "h": 3600.0}
    total, found = 0.0, False
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip()):
        if unit not in units:
            raise UnitError(f"invalid time span {text!r}")
        total, found = total + float(number) * units[unit], True
    if not found or re.sub(r"[\d.\sa-z]", "", text):
        raise UnitError(f"invalid time span {text!r}")
    return total


def unit_name(name: str) -> str:
    """The full unit name: "sglang" means "sglang.service"."""
    if "/" in name or not name or name.startswith("."):
        raise UnitError(f"Invalid unit name {name!r}")
    return name if "." in name else name + ".service"


def load_unit(name: str) -> dict:
    """Read and check units/NAME; return its settings (argv still unexpanded: the
    environment files are read at every start, as systemd does)."""
    path = ROOT / "units" / name
    if not path.is_file():
        raise UnitError(f"Unit {name} not found.")
    sections = parse_unit(path.read_text(encoding="utf-8"))
    service, unit = sections.get("Service", {}), sections.get("Unit", {})

    def last(table: dict[str, list[str]], key: str, default: str) -> str:
        values = table.get(key) or [default]
        return values[-1]

    kind = last(service, "Type", "simple")
    if kind not in SUPPORTED_TYPES:
        raise UnitError(f"{name}: Type={kind} is not supported by this stand-in")
    exec_start = service.get("ExecStart") or []
    if len(exec_start) != 1:
        raise UnitError(f"{name}: Service has {len(exec_start)} ExecStart= settings, needs one")
    restart = last(service, "Restart", "no")
    if restart not in RESTART_VALUES:
        raise UnitError(f"{name}: invalid Restart={restart}")
    command = exec_start[0].lstrip("-@:+!")
    return {
        "name": name,
        "words": split_words(resolve_specifiers(command, name)),
        "environment": [w for v in service.get("Environment", []) for w in split_words(v)],
        "environment_files": service.get("EnvironmentFile", []),
        "working_directory": last(service, "WorkingDirectory", "/"),
        "restart": restart,
        "restart_s": parse_seconds(last(service, "RestartSec", str(DEFAULT_RESTART_S))),
        "stop_s": parse_seconds(last(service, "TimeoutStopSec", str(DEFAULT_STOP_S))),
        "burst": int(last(unit, "StartLimitBurst", str(DEFAULT_BURST))),
        "interval_s": parse_seconds(last(unit, "StartLimitIntervalSec", str(DEFAULT_INTERVAL_S))),
    }


def start_argv(unit: dict) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of one start: Environment= then EnvironmentFile= (later wins)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for assignment in unit["environment"]:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise UnitError(f"invalid Environment= assignment {assignment!r}")
        env[key] = value
    for entry in unit["environment_files"]:
        optional = entry.startswith("-")
        path = entry.lstrip("-")
        try:
            env.update(read_environment_file(path))
        except OSError as exc:
            if not optional:
                raise UnitError(f"Failed to load environment files: {path}: {exc}") from exc
    argv = expand_command(unit["words"], env)
    if not argv or not argv[0].startswith("/"):
        raise UnitError(f"{unit['name']}: ExecStart= needs an absolute path, got {argv[:1]}")
    return argv, env


def should_restart(policy: str, code: int) -> bool:
    """Whether Restart=`policy` restarts after an exit with `code` (negative: a signal)."""
    clean = code == 0 or code in (-signal.SIGTERM, -signal.SIGHUP, -signal.SIGINT)
    return {
        "no": False,
        "always": True,
        "on-success": clean,
        "on-failure": not clean,
        "on-abnormal": code < 0 and not clean,
        "on-abort": code < 0 and not clean,
    }[policy]
