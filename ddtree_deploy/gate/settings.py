"""The serving gate's settings: `[gate]` in a patchset (its defaults) and in an inventory
(`[defaults.gate]`, `[groups.NAME.gate]`, `[hosts.NAME.gate]`), merged key by key in that
order, then resolved against the built-in defaults below (docs/gate.md says how they were
chosen)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ddtree_deploy.gate.verdict import Action

# observe: every check of full, measured and reported, but a push never rolls back on a
# failed one (the report says what would have failed); the `gate` command runs it as full.
GateMode = Literal["off", "quick", "full", "observe"]
# What an INCONCLUSIVE or NO_DATA check does (verdict.py): let the run go on, fail it, or
# stop it for a person (exit 3; a push rolls back and says so).
VerdictAction = Literal["pass", "fail", "needs_human"]

# One metrics rule: `NAME{label="v",...} OP NUMBER` or `delta(NAME{...}) OP NUMBER`, where
# delta is the change over the gate's run (after minus before); samples matching the name
# and labels are summed. metrics.py parses the /metrics text with prometheus_client.
METRIC_RULE = re.compile(
    r"^\s*(?:(?P<fn>delta)\(\s*)?(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"(?P<labels>\{[^{}]*\})?\s*(?(fn)\))\s*(?P<op>==|!=|<=|>=|<|>)\s*"
    r"(?P<value>[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*$"
)


class GateConfig(BaseModel):
    """One `[gate]` table as written: every key optional, so tables merge key by key.

    prompts: a JSONL file of {"input_ids": [...]} or {"text": "..."} lines (a patchset's:
    relative to its dir and locked; an inventory's: relative to the inventory file).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: GateMode | None = Field(
        default=None,
        description="off, quick (replay only) or full (replay, then load and bake); "
        "`push --gate` wins.",
    )
    prompts: str | None = Field(
        default=None,
        description='A JSONL file, {"text": ...} or {"input_ids": [...]} per line (relative '
        "to the inventory); default: the patchset's.",
    )
    requests: int | None = Field(
        default=None, ge=0, description="The load: at least this many requests..."
    )
    concurrency: int | None = Field(default=None, ge=1, description="...this many in flight...")
    max_new_tokens: int | None = Field(
        default=None, ge=1, description="Tokens per request (greedy: temperature 0, ignore_eos)."
    )
    warmup_requests: int | None = Field(
        default=None, ge=0, description="Requests after the restart, before measuring."
    )
    rounds: int | None = Field(
        default=None, ge=1, description="Replay rounds; their spread is the noise band."
    )
    bake_s: float | None = Field(
        default=None, ge=0, description="...for at least this many seconds, health polled."
    )
    request_timeout_s: float | None = Field(
        default=None, gt=0, description="A request slower than this is an error."
    )
    retries: int | None = Field(
        default=None, ge=0, description="Re-measures a failed (or inconclusive) speed check gets."
    )
    max_tokens_per_s_regression: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Largest fall of median tokens/s (a fall inside a wider noise band: "
        "inconclusive).",
    )
    min_accept_length_ratio: float | None = Field(
        default=None, ge=0, description="Lowest new / old accept length (plain decoding: 1.0)."
    )
    greedy_match: str | None = Field(
        default=None,
        description="exact, prefix:N or ratio:x (bf16 GPUs: prefix:N).",
    )
    max_error_rate: float | None = Field(
        default=None, ge=0, le=1, description="Largest errors / requests over replay + load."
    )
    max_p95_latency_ratio: float | None = Field(
        default=None,
        ge=1,
        description="Largest replay p95 latency, new / old (to x (1 + noise band): inconclusive).",
    )
    on_inconclusive: VerdictAction | None = Field(
        default=None,
        description="A change inside the noise band but past the threshold: pass, fail or "
        "needs_human (exit 3).",
    )
    on_no_data: VerdictAction | None = Field(
        default=None,
        description="A check with nothing to compare (no tokens, latencies, requests, "
        "/metrics text): pass, fail or needs_human.",
    )
    metrics: list[str] | None = Field(
        default=None,
        description="Rules over the new server's /metrics, e.g. \"sglang:num_aborted_requests"
        '_total == 0" or "delta(NAME) >= 1" (the change during the run).',
    )

    @field_validator("greedy_match")
    @classmethod
    def _greedy(cls, value: str | None) -> str | None:
        from ddtree_deploy.gate.greedy import parse_mode  # the one reading of the modes

        try:
            if value is not None:
                parse_mode(value)
        except ValueError:
            raise ValueError(
                f"greedy_match {value!r}: expected 'exact', 'prefix:N' (N >= 1) or 'ratio:x' "
                "(0 <= x <= 1)"
            ) from None
        return value

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: list[str] | None) -> list[str] | None:
        for rule in value or []:
            if not METRIC_RULE.match(rule):
                raise ValueError(
                    f"metrics rule {rule!r}: expected 'NAME{{labels}} OP NUMBER' or "
                    "'delta(NAME{labels}) OP NUMBER', OP one of == != < <= > >="
                )
            # the labels too, as the gate will read them (here, not at the import: the
            # parser imports prometheus_client, which only a gate needs)
            from ddtree_deploy.gate.metrics import parse_rule

            parse_rule(rule)
        return value

    def over(self, base: GateConfig | None) -> GateConfig:
        """This table's keys over `base`'s (the keys set here win)."""
        if base is None:
            return self
        return base.model_copy(update=self.model_dump(exclude_unset=True, exclude_none=True))


@dataclass(frozen=True)
class Thresholds:
    """What the new server must hold against its baseline (see compare.py), and what an
    INCONCLUSIVE or NO_DATA check does (verdict.py)."""

    max_tokens_per_s_regression: float = 0.05
    min_accept_length_ratio: float = 0.95
    greedy_match: str = "exact"
    max_error_rate: float = 0.0
    max_p95_latency_ratio: float = 1.5
    metrics: tuple[str, ...] = ()
    # Argo Rollouts: an Inconclusive run pauses for a person, an Error is never a success
    on_inconclusive: Action = Action.NEEDS_HUMAN
    on_no_data: Action = Action.FAIL


@dataclass(frozen=True)
class GateSettings:
    """A resolved gate: how to measure, and the thresholds. `prompts` are the prompt
    objects themselves (read from the JSONL file, or the patchset's [lossless] prompts)."""

    mode: GateMode
    prompts: tuple[dict[str, object], ...]
    requests: int = 32
    concurrency: int = 4
    max_new_tokens: int = 32
    warmup_requests: int = 2
    rounds: int = 3
    bake_s: float = 30.0
    request_timeout_s: float = 60.0
    retries: int = 2  # re-measures a failed speed check gets (pipeline/push_gate.py)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def loads(self) -> bool:
        """Whether this gate runs the sustained load and bake (mode full or observe, and
        load asked)."""
        return self.mode in ("full", "observe") and (self.requests > 0 or self.bake_s > 0)

    @property
    def enforced(self) -> bool:
        """Whether a failed check stops a push (every mode but observe)."""
        return self.mode != "observe"


_THRESHOLD_KEYS = (
    "max_tokens_per_s_regression",
    "min_accept_length_ratio",
    "greedy_match",
    "max_error_rate",
    "max_p95_latency_ratio",
)
_MEASURE_KEYS = (
    "requests",
    "concurrency",
    "max_new_tokens",
    "warmup_requests",
    "rounds",
    "bake_s",
    "request_timeout_s",
    "retries",
)


def resolve(
    config: GateConfig, prompts: tuple[dict[str, object], ...], mode: GateMode | None = None
) -> GateSettings:
    """Return the settings of a merged `config` with the built-in defaults filled in (pure).

    mode: the command line's `--gate`, over the table's own (default: full).
    """
    chosen: GateMode = mode or config.mode or "full"
    values = config.model_dump(exclude_none=True)
    chosen_limits: dict[str, Any] = {k: values[k] for k in _THRESHOLD_KEYS if k in values}
    for key in ("on_inconclusive", "on_no_data"):
        if key in values:
            chosen_limits[key] = Action(values[key])
    thresholds = Thresholds(**chosen_limits, metrics=tuple(config.metrics or ()))
    measure = {k: values[k] for k in _MEASURE_KEYS if k in values}
    return GateSettings(mode=chosen, prompts=prompts, thresholds=thresholds, **measure)
