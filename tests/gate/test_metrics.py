"""The /metrics rules: parsing, summing samples of real-shaped sglang text, verdicts."""

from __future__ import annotations

import pytest

from ddtree_deploy.gate.metrics import MetricRule, evaluate, parse_rule, sample_sum

# Shaped like sglang's /metrics (prometheus_client output): counters keep `_total` on their
# samples, names carry colons, one gauge per tp rank, a histogram.
SGLANG_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="x",tp_rank="0"} 2.0
sglang:num_running_reqs{engine_type="unified",model_name="x",tp_rank="1"} 1.0
sglang:num_running_reqs{engine_type="unified",model_name="y",tp_rank="0"} 7.0
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{model_name="x"} 0.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="x"} 1.234567e+06
# HELP sglang:e2e_request_latency_seconds Histogram of end-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="x"} 3.0
sglang:e2e_request_latency_seconds_bucket{le="1.0",model_name="x"} 9.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="x"} 10.0
sglang:e2e_request_latency_seconds_sum{model_name="x"} 4.5
sglang:e2e_request_latency_seconds_count{model_name="x"} 10.0
"""
AFTER = SGLANG_METRICS.replace(
    'sglang:num_aborted_requests_total{model_name="x"} 0.0',
    'sglang:num_aborted_requests_total{model_name="x"} 2.0',
).replace(
    'sglang:e2e_request_latency_seconds_count{model_name="x"} 10.0',
    'sglang:e2e_request_latency_seconds_count{model_name="x"} 42.0',
)


def test_parse_rule_reads_name_labels_op_and_value():
    rule = parse_rule('sglang:num_running_reqs{model_name="x", tp_rank="0"} <= 8')
    assert rule == MetricRule(
        None, "sglang:num_running_reqs", {"model_name": "x", "tp_rank": "0"}, "<=", 8.0
    )
    assert str(rule) == 'sglang:num_running_reqs{model_name="x",tp_rank="0"} <= 8'


def test_parse_rule_reads_delta_and_empty_labels():
    rule = parse_rule("delta( sglang:num_aborted_requests_total{} ) == 0")
    assert (rule.fn, rule.name, rule.labels, rule.op, rule.value) == (
        "delta",
        "sglang:num_aborted_requests_total",
        {},
        "==",
        0.0,
    )
    assert rule.subject == "delta(sglang:num_aborted_requests_total)"


def test_parse_rule_unescapes_label_values():
    rule = parse_rule(r'm{path="a\"b\\c",x="1,2"} > 1.5e1')
    assert rule.labels == {"path": 'a"b\\c', "x": "1,2"}
    assert rule.value == 15.0
    assert parse_rule(str(rule)) == rule


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("sglang:num_running_reqs", "expected 'NAME{labels} OP NUMBER'"),
        ("x => 3", "expected"),
        ("rate(x) > 0", "expected"),
        ("delta(x > 0", "expected"),
        ("x{a=b} == 0", "bad labels"),
        ('x{a="b" c="d"} == 0', "bad labels"),
        ('x{a="1",a="2"} == 0', "label 'a' given twice"),
        ('x{1a="b"} == 0', "bad labels"),
    ],
)
def test_parse_rule_refuses_bad_rules_naming_them(rule, message):
    with pytest.raises(ValueError, match="metrics rule") as raised:
        parse_rule(rule)
    assert message in str(raised.value)
    assert repr(rule) in str(raised.value)


def test_sample_sum_matches_sample_names_with_colons_and_total():
    assert sample_sum(SGLANG_METRICS, "sglang:num_aborted_requests_total", {}) == 0.0
    assert sample_sum(SGLANG_METRICS, "sglang:prompt_tokens_total", {}) == 1234567.0
    # the family name prometheus_client reports for the counter is not a sample's
    assert sample_sum(SGLANG_METRICS, "sglang:num_aborted_requests", {}) is None


def test_sample_sum_adds_every_sample_whose_labels_include_the_rules():
    assert sample_sum(SGLANG_METRICS, "sglang:num_running_reqs", {}) == 10.0
    assert sample_sum(SGLANG_METRICS, "sglang:num_running_reqs", {"model_name": "x"}) == 3.0
    wanted = {"model_name": "x", "tp_rank": "1"}
    assert sample_sum(SGLANG_METRICS, "sglang:num_running_reqs", wanted) == 1.0
    assert sample_sum(SGLANG_METRICS, "sglang:num_running_reqs", {"model_name": "z"}) is None


def test_sample_sum_reads_histogram_samples():
    name = "sglang:e2e_request_latency_seconds"
    assert sample_sum(SGLANG_METRICS, f"{name}_count", {}) == 10.0
    assert sample_sum(SGLANG_METRICS, f"{name}_sum", {"model_name": "x"}) == 4.5
    assert sample_sum(SGLANG_METRICS, f"{name}_bucket", {"le": "+Inf"}) == 10.0
    assert sample_sum(SGLANG_METRICS, name, {}) is None


def test_sample_sum_raises_on_unparsable_text():
    with pytest.raises(ValueError):
        sample_sum("this is { not metrics", "x", {})


def test_evaluate_passes_with_a_one_line_summary():
    rule = parse_rule("sglang:num_aborted_requests_total == 0")
    passed, detail = evaluate(rule, None, SGLANG_METRICS)
    assert passed
    assert detail == "sglang:num_aborted_requests_total = 0 (== 0 required)"


def test_evaluate_fails_when_the_comparison_does_not_hold():
    rule = parse_rule('sglang:num_running_reqs{model_name="x"} < 3')
    assert evaluate(rule, None, SGLANG_METRICS) == (
        False,
        'sglang:num_running_reqs{model_name="x"} = 3 (< 3 required)',
    )


def test_evaluate_delta_is_after_minus_before():
    rule = parse_rule("delta(sglang:e2e_request_latency_seconds_count) >= 30")
    passed, detail = evaluate(rule, SGLANG_METRICS, AFTER)
    assert passed
    assert detail.splitlines() == [
        "delta(sglang:e2e_request_latency_seconds_count) = 32 (>= 30 required)",
        "before the run: 10; after: 42",
    ]
    aborted = parse_rule("delta(sglang:num_aborted_requests_total) == 0")
    passed, detail = evaluate(aborted, SGLANG_METRICS, AFTER)
    assert not passed
    assert detail.splitlines()[0] == (
        "delta(sglang:num_aborted_requests_total) = 2 (== 0 required)"
    )


def test_evaluate_delta_counts_a_series_absent_before_from_zero():
    rule = parse_rule("delta(sglang:num_aborted_requests_total) == 0")
    before = "# TYPE other counter\nother_total 1.0\n"
    passed, detail = evaluate(rule, before, AFTER)
    assert not passed
    assert detail.splitlines() == [
        "delta(sglang:num_aborted_requests_total) = 2 (== 0 required)",
        "before the run: absent, counted as 0; after: 2",
    ]


def test_evaluate_fails_on_a_missing_metric_naming_the_rule():
    rule = parse_rule('sglang:num_aborted_requests_total{model_name="nope"} == 0')
    passed, detail = evaluate(rule, None, SGLANG_METRICS)
    assert not passed
    assert detail == (
        'sglang:num_aborted_requests_total{model_name="nope"}: no sample of '
        'sglang:num_aborted_requests_total{model_name="nope"} in the /metrics text after '
        "the run (== 0 required)"
    )


def test_evaluate_fails_on_missing_text_quoting_why():
    rule = parse_rule("delta(sglang:num_aborted_requests_total) == 0")
    passed, detail = evaluate(rule, None, AFTER, "GET /metrics: HTTP 404")
    assert not passed
    assert detail == (
        "delta(sglang:num_aborted_requests_total): no /metrics text before the run: "
        "GET /metrics: HTTP 404 (== 0 required)"
    )
    passed, detail = evaluate(parse_rule("x == 0"), None, None)
    assert not passed
    assert detail == "x: no /metrics text after the run (== 0 required)"


def test_evaluate_fails_on_unreadable_text():
    passed, detail = evaluate(parse_rule("x == 0"), None, "x{ garbage")
    assert not passed
    assert detail.startswith("x: unreadable /metrics text (")
