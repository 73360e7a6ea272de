"""The serving gate (issue #20): its settings, and the controller's verdicts on a new
server's measurement against the baseline measured on the old one (compare.py), its
/metrics rules (metrics.py) and greedy-output comparison (greedy.py)."""

from ddtree_deploy.gate.compare import (
    GateCheck,
    accept_length,
    compare,
    describe_failures,
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

__all__ = [
    "METRIC_RULE",
    "GateCheck",
    "GateConfig",
    "GateMode",
    "GateSettings",
    "GreedyVerdict",
    "MetricRule",
    "Thresholds",
    "accept_length",
    "compare",
    "compare_outputs",
    "describe_failures",
    "evaluate",
    "noise_band",
    "p95",
    "parse_rule",
    "resolve",
    "round_throughputs",
    "sample_sum",
]
