"""The gate's /metrics rules: parse a rule, sum its samples in Prometheus text, judge it.

A rule (settings.METRIC_RULE) is `NAME{label="v",...} OP NUMBER` or
`delta(NAME{...}) OP NUMBER`. Its value is the sum of every sample of the text whose
sample name is NAME and whose labels include the rule's (so `x{model_name="m"}` adds up
every tp_rank of model m); for delta, the sum after the gate's run minus the sum before.

Names are matched on SAMPLES, not families: prometheus_client strips `_total` from a
counter's family name (`sglang:num_aborted_requests`) but its sample keeps it
(`sglang:num_aborted_requests_total`), and a histogram's `_bucket`/`_sum`/`_count` are
samples of one family. sglang's names carry colons (`sglang:num_running_reqs`), which the
exposition format allows.

Pure: the texts come in as arguments (the host's gate_measure fetched them).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ddtree_deploy.gate.settings import METRIC_RULE

_OPS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class MetricRule:
    """One parsed rule: `fn` (None, or "delta": after minus before), the sample name, the
    labels a sample must carry, the comparison and the number it compares with."""

    fn: Literal["delta"] | None
    name: str
    labels: dict[str, str]
    op: str
    value: float

    @property
    def series(self) -> str:
        """Return the sample name and labels as written back: `name{a="b"}`."""
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels.items())
        return f"{self.name}{{{labels}}}" if labels else self.name

    @property
    def subject(self) -> str:
        """Return what the rule measures as written back: `delta(name{a="b"})`."""
        return f"delta({self.series})" if self.fn == "delta" else self.series

    @property
    def requirement(self) -> str:
        """Return what the value must be, e.g. `== 0`."""
        return f"{self.op} {format_number(self.value)}"

    def holds(self, value: float) -> bool:
        """Return whether `value` satisfies the rule's comparison."""
        return _OPS[self.op](value, self.value)

    def __str__(self) -> str:
        return f"{self.subject} {self.requirement}"


def parse_rule(rule: str) -> MetricRule:
    """Return the parsed form of one metrics rule (see the module docstring).

    Raises ValueError naming the rule when it does not have the rule's shape or its labels
    are not `{name="value",...}`.
    """
    match = METRIC_RULE.match(rule)
    if match is None:
        raise ValueError(
            f"metrics rule {rule!r}: expected 'NAME{{labels}} OP NUMBER' or "
            "'delta(NAME{labels}) OP NUMBER', OP one of == != < <= > >="
        )
    fn: Literal["delta"] | None = "delta" if match["fn"] else None
    labels = _parse_labels(rule, match["labels"] or "{}")
    return MetricRule(fn, match["name"], labels, match["op"], float(match["value"]))


def _parse_labels(rule: str, text: str) -> dict[str, str]:
    """Return the labels of `{a="b",c="d"}`; raises ValueError naming `rule` when malformed."""
    body = text[1:-1]
    labels: dict[str, str] = {}
    position = 0
    while body[position:].strip():
        match = _LABEL.match(body, position)
        if match is None:
            raise ValueError(
                f'metrics rule {rule!r}: bad labels {text}: expected name="value" pairs '
                "separated by commas"
            )
        name, value = match[1], match[2]
        if name in labels:
            raise ValueError(f"metrics rule {rule!r}: label {name!r} given twice")
        labels[name] = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), value)
        position = match.end()
    return labels


def _escape(value: str) -> str:
    """Return a label value escaped as the exposition format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample_sum(text: str, name: str, labels: dict[str, str]) -> float | None:
    """Return the sum of the samples of `text` named `name` whose labels include `labels`.

    text: Prometheus text exposition; name: a SAMPLE name (`..._total` for a counter,
    `..._count` for a histogram). None when no sample matches. Raises ValueError when the
    text cannot be parsed.
    """
    # Imported here: prometheus_client (with http.server under it) costs ~40 ms, and only a
    # push that gates on /metrics reads any; every command loads this module.
    from prometheus_client.parser import text_string_to_metric_families

    wanted = labels.items()
    values = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and wanted <= sample.labels.items()
    ]
    return math.fsum(values) if values else None


def measure(
    rule: MetricRule, before: str | None, after: str | None, unavailable: str | None = None
) -> tuple[float | None, str]:
    """Return the rule's value over the texts and, when it has none, why (else "").

    before/after: the /metrics text before and after the gate's run (None: not fetched;
    `unavailable` says why, and is quoted). For delta, a series absent before but present
    after counts from 0 (a labelled counter is first exported when first incremented).
    """
    then, now, why = _sums(rule, before, after, unavailable)
    if now is None:
        return None, why
    return (now - (then or 0.0) if rule.fn == "delta" else now), ""


def _sums(
    rule: MetricRule, before: str | None, after: str | None, unavailable: str | None
) -> tuple[float | None, float | None, str]:
    """Return the rule's sample sums before (delta only) and after, and why `after`'s is None."""
    because = f": {unavailable}" if unavailable else ""
    if after is None:
        return None, None, f"no /metrics text after the run{because}"
    if rule.fn == "delta" and before is None:
        return None, None, f"no /metrics text before the run{because}"
    try:
        now = sample_sum(after, rule.name, rule.labels)
        then = (
            sample_sum(before, rule.name, rule.labels) if rule.fn and before is not None else None
        )
    except ValueError as error:
        return None, None, f"unreadable /metrics text ({error})"
    if now is None:
        return None, None, f"no sample of {rule.series} in the /metrics text after the run"
    return then, now, ""


def evaluate(
    rule: MetricRule, before: str | None, after: str | None, unavailable: str | None = None
) -> tuple[bool, str]:
    """Return whether the rule holds over the texts, and a detail whose first line is a
    one-line summary ("sglang:num_aborted_requests_total = 0 (== 0 required)").

    A missing text or metric fails with the reason, naming the rule; `unavailable` (why the
    texts are missing, e.g. the measurement's metrics_error) is quoted then. A delta's
    second line gives both sums.
    """
    then, now, why = _sums(rule, before, after, unavailable)
    if now is None:
        return False, f"{rule.subject}: {why} ({rule.requirement} required)"
    value = now - (then or 0.0) if rule.fn == "delta" else now
    summary = f"{rule.subject} = {format_number(value)} ({rule.requirement} required)"
    if rule.fn == "delta":
        start = "absent, counted as 0" if then is None else format_number(then)
        summary += f"\nbefore the run: {start}; after: {format_number(now)}"
    return rule.holds(value), summary


def format_number(value: float) -> str:
    """Return `value` shown briefly: whole numbers without a point, else 6 significant
    digits (`0`, `1234567`, `0.125`)."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"
