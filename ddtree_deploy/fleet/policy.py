"""Rollout policy, pure: parse `--canary/--batch/--max-fail/--shard`, plan waves, decide stops.

Percentages are always of the whole selection (after `--shard`), like Ansible's `serial`:
`--batch 25%` of 8 hosts is 2 hosts a wave, rounded down but never below one host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ddtree_deploy.errors import ConfigError

T = TypeVar("T")

_COUNT = re.compile(r"^\s*(\d+)\s*(%?)\s*$")
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Count:
    """A number of hosts given as `N` or as `P%` of the selection."""

    value: int
    percent: bool = False

    def of(self, total: int) -> int:
        """Hosts this count means out of `total` (percent rounded down)."""
        return total * self.value // 100 if self.percent else self.value

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


@dataclass(frozen=True)
class RolloutPolicy:
    """How many hosts at a time, in which waves, and when to stop starting new ones."""

    parallel: int = 16
    canary: int = 0
    batches: tuple[Count, ...] = ()
    max_fail: Count | None = None
    rollback_on_abort: bool = True


@dataclass(frozen=True)
class Wave:
    """Hosts started together; the canary wave runs alone and stops the fleet on any failure."""

    index: int
    hosts: tuple[str, ...]
    canary: bool = False

    @property
    def label(self) -> str:
        return "canary" if self.canary else f"wave {self.index}"


def parse_count(text: str, option: str = "--max-fail") -> Count:
    """`3` or `25%`; raises ConfigError for anything else (percent above 100 included)."""
    match = _COUNT.match(text)
    if match is None:
        raise ConfigError(f"{option}: expected N or P%, got {text!r}")
    count = Count(int(match.group(1)), bool(match.group(2)))
    if count.percent and count.value > 100:
        raise ConfigError(f"{option}: {text!r} is more than 100%")
    return count


def parse_batches(text: str) -> tuple[Count, ...]:
    """`--batch 1,5,25%`: wave sizes in order, the last one repeating; sizes must be > 0."""
    counts = tuple(parse_count(part, "--batch") for part in text.split(",") if part.strip())
    if not counts:
        raise ConfigError(f"--batch: no size in {text!r}")
    if any(c.value == 0 for c in counts):
        raise ConfigError(f"--batch: a wave of 0 hosts never ends ({text!r})")
    return counts


def parse_shard(text: str) -> tuple[int, int]:
    """`--shard i/n` with 1 <= i <= n, as CI matrices number their jobs (1-based)."""
    match = _SHARD.match(text)
    if match is None:
        raise ConfigError(f"--shard: expected i/n (e.g. 2/4), got {text!r}")
    index, total = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= total:
        raise ConfigError(f"--shard: need 1 <= i <= n, got {text!r}")
    return index, total


def shard_items(items: Sequence[T], index: int, total: int) -> list[T]:
    """Shard `index` of `total` (1-based): every total-th item starting at index-1.

    Round-robin by position, so appending hosts to the inventory never moves existing hosts
    between shards, and every item lands in exactly one shard.
    """
    return [item for k, item in enumerate(items) if k % total == index - 1]


def plan_waves(names: Sequence[str], canary: int = 0, batches: Sequence[Count] = ()) -> list[Wave]:
    """Split hosts (in order) into waves: the first `canary` alone, then `batches` sizes.

    No batches means one wave with everyone left (`--parallel` still bounds concurrency).
    The last batch size repeats until every host has a wave.
    """
    total = len(names)
    waves: list[Wave] = []
    start = min(max(canary, 0), total)
    if start:
        waves.append(Wave(0, tuple(names[:start]), canary=True))
    sizes = [max(1, c.of(total)) for c in batches] or [total]
    step = 0
    while start < total:
        size = sizes[min(step, len(sizes) - 1)]
        waves.append(Wave(len(waves), tuple(names[start : start + size])))
        start += size
        step += 1
    return waves


def first_started(names: Sequence[str], policy: RolloutPolicy) -> list[str]:
    """The hosts a rollout of `names` (no restart groups) starts at once: the first wave's
    first `parallel`. They are sure to be contacted unless the run dies first, which is
    why the CLI may open their connections ahead (fleet/ahead.py)."""
    waves = plan_waves(names, policy.canary, policy.batches)
    return list(waves[0].hosts[: max(1, policy.parallel)]) if waves else []


def max_fail_exceeded(failed: int, total: int, max_fail: Count | None) -> bool:
    """True once `failed` hosts are more than `--max-fail` allows (None: no limit)."""
    if max_fail is None:
        return False
    if max_fail.percent:
        return failed * 100 > max_fail.value * total
    return failed > max_fail.value


def stop_reason(
    wave: Wave, failed_in_wave: int, failed: int, total: int, max_fail: Count | None
) -> str | None:
    """Why no new host may start after these failures, or None to go on."""
    if wave.canary and failed_in_wave:
        return f"canary failed on {failed_in_wave} host(s)"
    if max_fail_exceeded(failed, total, max_fail):
        return f"{failed} of {total} host(s) failed, more than --max-fail {max_fail}"
    return None
