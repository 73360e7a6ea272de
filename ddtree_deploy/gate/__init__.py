"""The serving gate (issue #20): its settings, and the controller's verdicts on a new
server's measurement against the baseline measured on the old one (compare.py: PASS, FAIL,
INCONCLUSIVE or NO_DATA per check, and what each does: verdict.py), its /metrics rules
(metrics.py) and greedy-output comparison (greedy.py)."""

from ddtree_deploy.gate.compare import (
    GateCheck,
    accept_length,
    compare,
    describe_failures,
    describe_undecided,
    noise_band,
    p95,
    round_throughputs,
)
from ddtree_deploy.gate.greedy import GreedyVerdict, compare_outputs
from ddtree_deploy.gate.metrics import MetricRule, evaluate, parse_rule, sample_sum
from ddtree_deploy.gate.settings import (
    METRIC_RULE,
    GateConfig,
    GateMode,
    GateSettings,
    Thresholds,
    resolve,
)
from ddtree_deploy.gate.verdict import Action, Verdict

__all__ = [
    "METRIC_RULE",
    "Action",
    "GateCheck",
    "GateConfig",
    "GateMode",
    "GateSettings",
    "GreedyVerdict",
    "MetricRule",
    "Thresholds",
    "Verdict",
    "accept_length",
    "compare",
    "compare_outputs",
    "describe_failures",
    "describe_undecided",
    "evaluate",
    "noise_band",
    "p95",
    "parse_rule",
    "resolve",
    "round_throughputs",
    "sample_sum",
]
