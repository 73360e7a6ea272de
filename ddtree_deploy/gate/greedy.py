"""Greedy outputs compared prompt by prompt: the gate's `greedy_match` check.

Modes (settings.GateConfig.greedy_match):

- `exact`: every prompt's output equals the baseline's.
- `prefix:N`: every prompt matches on its first tokens. With k = min(N, the longer of the
  two outputs), a prompt matches when both outputs have at least k tokens and agree on the
  first k: outputs that both stop before N must be equal, and one that stops early while
  the other goes on does not match.
- `ratio:x`: the fraction of prompts whose outputs are exactly equal is at least x.

Prompts pair up by index; a prompt without an output on either side (its request failed,
or one replay had fewer prompts) never matches. Token positions in messages are 0-based
indexes into the output; prompts are numbered from 1 ("prompt 3/8").
"""

from __future__ import annotations

from dataclasses import dataclass

Outputs = list[list[int] | None]


@dataclass(frozen=True)
class GreedyVerdict:
    """How the outputs compared: prompts matched out of total, whether the mode held, what
    the mode asked (`limit`) and the first mismatch explained ("" when none)."""

    matched: int
    total: int
    passed: bool
    limit: str
    first_difference: str


def parse_mode(mode: str) -> tuple[str, float]:
    """Return (kind, parameter) of a greedy_match mode: ("exact", 0), ("prefix", N) or
    ("ratio", x). Raises ValueError on anything else (settings validate it first)."""
    kind, _, argument = mode.partition(":")
    try:
        if kind == "exact" and not argument:
            return kind, 0.0
        if kind == "prefix" and int(argument) >= 1:
            return kind, float(int(argument))
        if kind == "ratio" and 0.0 <= float(argument) <= 1.0:
            return kind, float(argument)
    except ValueError:
        pass
    raise ValueError(f"greedy_match {mode!r}: expected 'exact', 'prefix:N' or 'ratio:x'")


def compare_outputs(baseline: Outputs, new: Outputs, mode: str) -> GreedyVerdict:
    """Return the verdict of `mode` over the two replays' outputs (see the module docstring).

    An empty comparison (no prompts on either side) passes with 0/0 matched.
    """
    kind, parameter = parse_mode(mode)
    prefix = int(parameter) if kind == "prefix" else None
    total = max(len(baseline), len(new))
    matched = 0
    first = ""
    for index in range(total):
        old = baseline[index] if index < len(baseline) else None
        now = new[index] if index < len(new) else None
        if _matches(old, now, prefix):
            matched += 1
        elif not first:
            first = f"prompt {index + 1}/{total}: {_difference(old, now)}"
    if kind == "ratio":
        passed = total == 0 or matched >= parameter * total - 1e-9
        limit = f">= {parameter:.0%} of prompts exactly equal"
    else:
        passed = matched == total
        limit = "every prompt equal" if prefix is None else f"first {prefix} tokens equal"
    return GreedyVerdict(matched, total, passed, limit, first)


def _matches(old: list[int] | None, now: list[int] | None, prefix: int | None) -> bool:
    """Return whether one prompt's outputs match: equal, or on the first tokens (prefix)."""
    if old is None or now is None:
        return False
    if prefix is None:
        return old == now
    needed = min(prefix, max(len(old), len(now)))
    return len(old) >= needed and len(now) >= needed and old[:needed] == now[:needed]


def _difference(old: list[int] | None, now: list[int] | None) -> str:
    """Return where two outputs first differ, for people."""
    if old is None or now is None:
        missing = [side for side, out in (("baseline", old), ("new", now)) if out is None]
        return f"no output from the {' and '.join(missing)} request (failed or missing)"
    for index, (a, b) in enumerate(zip(old, now, strict=False)):
        if a != b:
            return f"first difference at token {index}: {a} (baseline) vs {b} (new)"
    index = min(len(old), len(now))
    shown_old = str(old[index]) if index < len(old) else "end of output"
    shown_new = str(now[index]) if index < len(now) else "end of output"
    return f"first difference at token {index}: {shown_old} (baseline) vs {shown_new} (new)"
