"""The gate's verdicts: a new server's measurement against its baseline, rule by rule."""

from __future__ import annotations

import pytest

from ddtree_deploy.agent.host.wire_results import GateMeasurement, LoadStats, ReplayStats
from ddtree_deploy.gate.compare import (
    GateCheck,
    accept_length,
    compare,
    describe_failures,
    describe_undecided,
    p95,
    round_throughputs,
)
from ddtree_deploy.gate.settings import Thresholds
from ddtree_deploy.gate.verdict import Action, Verdict

OUTPUTS = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
METRICS = """\
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{model_name="x"} 1.0
"""


def load(**changes: object) -> LoadStats:
    """A clean sustained load, with `changes` applied."""
    values: dict[str, object] = {
        "requests": 32,
        "errors": 0,
        "first_error": None,
        "tokens": 1024,
        "wall_s": 10.0,
        "latencies_s": [0.3] * 32,
        "health_polls": 5,
        "health_failures": 0,
        "first_health_failure": None,
    }
    values.update(changes)
    return LoadStats(**values)


def measured(
    tokens_per_s: tuple[float, ...] = (100.0, 100.0, 100.0),
    *,
    tokens: int = 300,
    verify_ct: int = 100,
    outputs: list[list[int] | None] | None = None,
    latencies_s: list[float] | None = None,
    requests: int = 4,
    errors: int = 0,
    first_error: str | None = None,
    stress: LoadStats | None = None,
    metrics_before: str | None = None,
    metrics_after: str | None = None,
    metrics_error: str | None = None,
) -> GateMeasurement:
    """A measurement whose replay rounds ran at `tokens_per_s` (10 s each)."""
    replay = ReplayStats(
        requests=requests,
        errors=errors,
        first_error=first_error,
        tokens=tokens,
        verify_ct=verify_ct,
        rounds=[{"tokens": rate * 10.0, "wall_s": 10.0} for rate in tokens_per_s],
        latencies_s=[0.2] * 4 if latencies_s is None else latencies_s,
        outputs=[list(o) for o in OUTPUTS] if outputs is None else outputs,
    )
    return GateMeasurement(
        phase="after",
        at="2025-01-01T00:00:00Z",
        server_url="http://127.0.0.1:30000",
        algorithm="DDTREE",
        replay=replay,
        load=stress,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        metrics_error=metrics_error,
        saved=None,
    )


def check(name: str, baseline: GateMeasurement, new: GateMeasurement, **limits) -> GateCheck:
    """The one check `name` of compare() (on_inconclusive / on_no_data: Action values)."""
    for key in ("on_inconclusive", "on_no_data"):
        if key in limits:
            limits[key] = Action(limits[key])
    [found] = compare(baseline, new, Thresholds(**limits), only=frozenset({name}))
    return found


def first_line(found: GateCheck) -> str:
    return found.detail.splitlines()[0]


# helpers


def test_round_throughputs_divides_tokens_by_wall_time_and_skips_empty_rounds():
    replay = measured((50.0, 80.0)).replay
    assert round_throughputs(replay) == [50.0, 80.0]
    empty = ReplayStats(0, 0, None, 0, 0, [{"tokens": 5.0, "wall_s": 0.0}], [], [])
    assert round_throughputs(empty) == []


def test_accept_length_is_tokens_per_verify_or_one_without_speculation():
    assert accept_length(measured(tokens=342, verify_ct=100).replay) == 3.42
    assert accept_length(measured(tokens=342, verify_ct=0).replay) == 1.0


def test_p95_is_nearest_rank():
    assert p95([]) is None
    assert p95([0.5]) == 0.5
    assert p95([float(v) for v in range(1, 21)]) == 19.0  # ceil(0.95 * 20) = 19th
    assert p95([float(v) for v in range(100, 0, -1)]) == 95.0
    assert p95([1.0, 2.0, 3.0]) == 3.0


# tokens_per_s


def test_tokens_per_s_passes_within_the_threshold():
    found = check("tokens_per_s", measured((100.0,)), measured((96.0,)))
    assert found.passed
    assert (found.baseline, found.new) == ("100.0 tok/s", "96.0 tok/s")
    assert found.limit == ">= 95.0 tok/s (-5%; noise band 0.0%)"
    assert first_line(found) == (
        "tokens/s 100.0 -> 96.0 (-4.0%), allowed -5.0% (threshold; noise band 0.0%)"
    )


def test_tokens_per_s_passes_exactly_at_the_threshold():
    assert check("tokens_per_s", measured((100.0,)), measured((95.0,))).passed


def test_tokens_per_s_fails_beyond_the_threshold():
    found = check("tokens_per_s", measured((100.0,)), measured((90.0,)))
    assert not found.passed
    assert first_line(found) == (
        "tokens/s 100.0 -> 90.0 (-10.0%), allowed -5.0% (threshold; noise band 0.0%)"
    )


def test_tokens_per_s_uses_medians_of_the_rounds():
    found = check("tokens_per_s", measured((100.0, 101.0, 102.0)), measured((10.0, 99.0, 500.0)))
    assert found.passed
    assert found.detail.splitlines()[1] == (
        "rounds (tok/s): baseline 100.0, 101.0, 102.0; new 10.0, 99.0, 500.0"
    )


def test_a_change_inside_a_noisy_baseline_band_is_inconclusive_not_a_pass():
    """Review 3 finding 7: a band of 20% cannot resolve a 5% threshold; a -15% change
    inside it is INCONCLUSIVE (today's code passed it), and by default needs a human."""
    noisy = measured((90.0, 100.0, 110.0))  # band (110 - 90) / 100 = 20%
    found = check("tokens_per_s", noisy, measured((85.0,)))
    assert found.verdict == Verdict.INCONCLUSIVE and not found.passed and found.needs_human
    assert found.limit == ">= 95.0 tok/s (-5%; noise band 20.0%)"
    assert first_line(found) == (
        "tokens/s 100.0 -> 85.0 (-15.0%): inconclusive: noise band 20.0% > threshold 5.0% "
        "(passes down to -5.0%, fails past -20.0%)"
    )
    assert check("tokens_per_s", noisy, measured((96.0,))).verdict == Verdict.PASS
    assert check("tokens_per_s", measured((100.0,)), measured((85.0,))).verdict == Verdict.FAIL


@pytest.mark.parametrize(
    "action, passed, needs_human",
    [(Action.PASS, True, False), (Action.FAIL, False, False), (Action.NEEDS_HUMAN, False, True)],
)
def test_on_inconclusive_says_what_an_inconclusive_check_does(action, passed, needs_human):
    noisy = measured((90.0, 100.0, 110.0))
    found = check("tokens_per_s", noisy, measured((85.0,)), on_inconclusive=action)
    assert found.verdict == Verdict.INCONCLUSIVE and found.action == action
    assert (found.passed, found.needs_human) == (passed, needs_human)


def test_a_noisy_new_measurement_makes_it_inconclusive_too():
    """Rounds of the new server spread 20% (another host's load on the same CPU): the same
    15% drop cannot be told from noise; a steady 15% drop can."""
    steady = measured((100.0, 100.0, 100.0))
    assert check("tokens_per_s", steady, measured((75.0, 85.0, 95.0))).verdict == (
        Verdict.INCONCLUSIVE
    )
    assert check("tokens_per_s", steady, measured((85.0, 85.0, 85.0))).verdict == Verdict.FAIL


def test_a_2x_slowdown_fails_through_a_20_percent_band():
    found = check("tokens_per_s", measured((90.0, 100.0, 110.0)), measured((50.0, 50.0, 50.0)))
    assert found.verdict == Verdict.FAIL and not found.passed
    assert "(-50.0%), past the noise band -20.0% (threshold 5.0%)" in first_line(found)


def test_the_noise_band_is_capped_at_half():
    wild = measured((20.0, 100.0, 180.0))  # spread 160%
    found = check("tokens_per_s", wild, measured((40.0,)))
    assert found.verdict == Verdict.FAIL
    assert found.limit == ">= 95.0 tok/s (-5%; noise band 50.0%)"
    assert "past the noise band -50.0%" in first_line(found)
    assert check("tokens_per_s", wild, measured((50.0,))).verdict == Verdict.INCONCLUSIVE


def test_a_baseline_without_tokens_is_no_data():
    found = check("tokens_per_s", measured((0.0, 0.0)), measured((100.0,)))
    assert found.verdict == Verdict.NO_DATA and not found.passed  # default on_no_data: fail
    assert found.detail == "baseline measured no tokens"
    assert check("tokens_per_s", measured(()), measured((100.0,))).verdict == Verdict.NO_DATA


def test_a_new_server_without_rounds_is_no_data():
    found = check("tokens_per_s", measured((100.0,)), measured(()))
    assert found.verdict == Verdict.NO_DATA and not found.passed
    assert found.new == "no rounds"


# accept_length_ratio


def test_accept_length_ratio_passes_and_fails_on_the_minimum():
    base = measured(tokens=340, verify_ct=100)
    found = check("accept_length_ratio", base, measured(tokens=330, verify_ct=100))
    assert found.passed
    assert (found.baseline, found.new) == ("3.40", "3.30")
    assert found.limit == ">= 0.95x baseline (>= 3.23)"
    assert first_line(found) == "accept length 3.40 -> 3.30 (ratio 0.971, >= 0.95 required)"
    worse = check("accept_length_ratio", base, measured(tokens=300, verify_ct=100))
    assert not worse.passed
    assert "ratio 0.882" in first_line(worse)


def test_accept_length_ratio_of_a_server_that_stopped_speculating():
    found = check("accept_length_ratio", measured(), measured(verify_ct=0))
    assert not found.passed
    assert found.new == "1.00 (no speculation)"
    plain = check("accept_length_ratio", measured(verify_ct=0), measured(verify_ct=0))
    assert plain.passed
    assert plain.baseline == "1.00 (no speculation)"


# greedy_match


def test_greedy_exact_passes_on_equal_outputs():
    found = check("greedy_match", measured(), measured())
    assert found.passed
    assert found.detail == "4/4 prompts match (exact)"
    assert (found.baseline, found.new, found.limit) == (
        "4 prompts",
        "4/4 match",
        "every prompt equal",
    )


def test_greedy_exact_names_the_first_difference():
    changed = [list(o) for o in OUTPUTS]
    changed[2][3] = 99
    changed[3][0] = 98
    found = check("greedy_match", measured(), measured(outputs=changed))
    assert not found.passed
    assert found.detail == (
        "2/4 prompts match (exact); prompt 3/4: first difference at token 3: "
        "12 (baseline) vs 99 (new)"
    )


def test_greedy_exact_reports_an_output_that_ends_early():
    changed = [list(o) for o in OUTPUTS]
    changed[0] = [1, 2]
    found = check("greedy_match", measured(), measured(outputs=changed))
    assert not found.passed
    assert found.detail.endswith(
        "prompt 1/4: first difference at token 2: 3 (baseline) vs end of output (new)"
    )


def test_greedy_none_outputs_never_match():
    found = check("greedy_match", measured(), measured(outputs=[None, *OUTPUTS[1:]]))
    assert not found.passed
    assert found.detail == (
        "3/4 prompts match (exact); prompt 1/4: no output from the new request (failed or missing)"
    )
    both = check("greedy_match", measured(outputs=[None]), measured(outputs=[None]))
    assert not both.passed
    assert "no output from the baseline and new request" in both.detail
    shorter = check("greedy_match", measured(), measured(outputs=OUTPUTS[:3]))
    assert not shorter.passed
    assert "prompt 4/4: no output from the new request" in shorter.detail


def test_greedy_prefix_compares_the_first_n_tokens():
    changed = [[*o[:2], 0, 0] for o in OUTPUTS]
    found = check("greedy_match", measured(), measured(outputs=changed), greedy_match="prefix:2")
    assert found.passed
    assert found.limit == "first 2 tokens equal"
    failed = check("greedy_match", measured(), measured(outputs=changed), greedy_match="prefix:3")
    assert not failed.passed
    assert failed.detail == (
        "0/4 prompts match (prefix:3); prompt 1/4: first difference at token 2: "
        "3 (baseline) vs 0 (new)"
    )


def test_greedy_prefix_with_outputs_shorter_than_n():
    base = measured(outputs=[[1, 2], [1, 2, 3], [1, 2, 3]])
    new = measured(outputs=[[1, 2], [1, 2], [1, 2, 3, 4, 5]])
    found = check("greedy_match", base, new, greedy_match="prefix:4")
    # equal short outputs match; one that stops while the other goes on does not, nor one
    # that goes on past where the other stopped before N
    assert not found.passed
    assert found.detail == (
        "1/3 prompts match (prefix:4); prompt 2/3: first difference at token 2: "
        "3 (baseline) vs end of output (new)"
    )
    assert check("greedy_match", base, new, greedy_match="prefix:2").passed


def test_greedy_ratio_counts_exactly_equal_prompts():
    changed = [list(o) for o in OUTPUTS]
    changed[1] = [5, 6, 7, 0]
    new = measured(outputs=changed)
    found = check("greedy_match", measured(), new, greedy_match="ratio:0.75")
    assert found.passed
    assert found.limit == ">= 75% of prompts exactly equal"
    assert found.detail.startswith("3/4 prompts match (ratio:0.75); prompt 2/4: ")
    assert not check("greedy_match", measured(), new, greedy_match="ratio:0.8").passed


def test_greedy_refuses_a_mode_settings_would_refuse():
    with pytest.raises(ValueError, match="greedy_match 'fuzzy'"):
        check("greedy_match", measured(), measured(), greedy_match="fuzzy")


# error_rate


def test_error_rate_passes_without_errors():
    found = check("error_rate", measured(), measured(stress=load()))
    assert found.passed
    assert found.detail == "0 errors in 36 requests (0.0%, <= 0.0% allowed)"
    assert (found.baseline, found.new, found.limit) == ("0/4 (0.0%)", "0/36 (0.0%)", "<= 0.0%")


def test_error_rate_quotes_the_first_error():
    new = measured(errors=1, first_error="HTTP 500: boom", stress=load(errors=1, first_error="x"))
    found = check("error_rate", measured(), new)
    assert not found.passed
    assert found.detail == (
        "2 errors in 36 requests (5.6%, <= 0.0% allowed); first: HTTP 500: boom"
    )
    from_load = measured(stress=load(errors=3, first_error="timeout after 60 s"))
    found = check("error_rate", measured(), from_load, max_error_rate=0.05)
    assert not found.passed
    assert first_line(found).endswith("(8.3%, <= 5.0% allowed); first: timeout after 60 s")
    assert check("error_rate", measured(), from_load, max_error_rate=0.1).passed


# p95_latency_ratio


def test_p95_latency_ratio_passes_and_fails():
    base = measured(latencies_s=[0.2] * 19 + [0.4])
    ok = check("p95_latency_ratio", base, measured(latencies_s=[0.25] * 20))
    assert ok.passed
    assert (ok.baseline, ok.new) == ("0.200 s", "0.250 s")
    assert first_line(ok) == "p95 latency 0.200 s -> 0.250 s (x1.25, <= x1.50 allowed)"
    slow = check("p95_latency_ratio", base, measured(latencies_s=[0.2] * 10 + [0.4] * 10))
    assert not slow.passed
    assert "(x2.00, <= x1.50 allowed)" in first_line(slow)


def test_p95_latency_ratio_inside_the_noise_band_is_inconclusive():
    base = measured((90.0, 100.0, 110.0), latencies_s=[0.2])
    found = check("p95_latency_ratio", base, measured(latencies_s=[0.35]))
    assert found.verdict == Verdict.INCONCLUSIVE  # 1.5 < 1.75 <= 1.5 x 1.2 (passed before)
    assert found.limit == "<= x1.50 (inconclusive to x1.80: noise band 20.0%)"
    assert first_line(found).endswith("(fails past x1.80)")
    assert check("p95_latency_ratio", base, measured(latencies_s=[0.3])).verdict == Verdict.PASS
    slow = check("p95_latency_ratio", base, measured(latencies_s=[0.4]))
    assert slow.verdict == Verdict.FAIL and "past x1.80 with the noise band" in first_line(slow)


def test_p95_latency_ratio_without_latencies_is_no_data_not_a_pass():
    found = check("p95_latency_ratio", measured(latencies_s=[]), measured())
    assert found.verdict == Verdict.NO_DATA and not found.passed
    assert found.detail == "no data: the baseline measured no replay latencies"
    found = check("p95_latency_ratio", measured(), measured(latencies_s=[]))
    assert found.verdict == Verdict.NO_DATA
    assert found.detail == "no data: the new server measured no replay latencies"
    let_pass = check("p95_latency_ratio", measured(), measured(latencies_s=[]), on_no_data="pass")
    assert let_pass.verdict == Verdict.NO_DATA and let_pass.passed


def test_missing_data_is_no_data_in_every_check():
    """Review 3 finding 7: missing data passed (a zero baseline accept length, no requests,
    no outputs, no health polls, no /metrics text); each is NO_DATA, failing by default."""
    rule = "sglang:num_aborted_requests_total == 0"
    cases = [
        ("accept_length_ratio", measured(tokens=0), measured(), {}),
        ("error_rate", measured(), measured(requests=0), {}),
        ("greedy_match", measured(outputs=[]), measured(outputs=[]), {}),
        ("health", measured(), measured(stress=load(health_polls=0)), {}),
        (f"metrics: {rule}", measured(), measured(metrics_error="HTTP 404"), {"metrics": (rule,)}),
    ]
    for name, base, new, limits in cases:
        found = check(name, base, new, **limits)
        assert (found.verdict, found.action) == (Verdict.NO_DATA, Action.FAIL), (name, found)
        found = check(name, base, new, on_no_data="needs_human", **limits)
        assert found.needs_human, (name, found)


# health


def test_health_only_with_a_load():
    names = [c.name for c in compare(measured(), measured(), Thresholds())]
    assert "health" not in names
    found = check("health", measured(), measured(stress=load()))
    assert found.passed
    assert found.detail == "5 health polls, 0 failed"


def test_health_fails_on_failed_polls_quoting_the_first():
    stress = load(health_failures=2, first_health_failure="GET /health: connection refused")
    found = check("health", measured(), measured(stress=stress))
    assert not found.passed
    assert found.new == "2/5 failed"
    assert found.detail == "5 health polls, 2 failed; first: GET /health: connection refused"


def test_health_fails_when_the_load_stopped_early():
    found = check("health", measured(), measured(stress=load(stopped_early="8 consecutive errors")))
    assert not found.passed
    assert first_line(found) == (
        "load stopped early: 8 consecutive errors; 5 health polls, 0 failed"
    )


# metrics


def test_a_metrics_rule_is_one_check_on_the_new_servers_text():
    rule = "sglang:num_aborted_requests_total <= 1"
    base = measured(metrics_after=METRICS.replace("} 1.0", "} 0.0"))
    found = check(f"metrics: {rule}", base, measured(metrics_after=METRICS), metrics=(rule,))
    assert found.passed
    assert (found.baseline, found.new, found.limit) == ("0", "1", "<= 1")
    assert found.detail == "sglang:num_aborted_requests_total = 1 (<= 1 required)"


def test_a_delta_metrics_rule_fails_on_growth():
    rule = "delta(sglang:num_aborted_requests_total) == 0"
    before = METRICS.replace("} 1.0", "} 0.0")
    new = measured(metrics_before=before, metrics_after=METRICS)
    found = check(f"metrics: {rule}", measured(), new, metrics=(rule,))
    assert not found.passed
    assert found.baseline == ""  # the baseline was measured without /metrics
    assert first_line(found) == "delta(sglang:num_aborted_requests_total) = 1 (== 0 required)"


def test_a_metrics_rule_without_text_quotes_the_metrics_error():
    rule = "sglang:num_aborted_requests_total == 0"
    new = measured(metrics_error="GET /metrics: HTTP 404 (start sglang with --enable-metrics)")
    found = check(f"metrics: {rule}", measured(), new, metrics=(rule,))
    assert not found.passed
    assert found.new == "missing"
    assert found.detail == (
        "sglang:num_aborted_requests_total: no /metrics text after the run: GET /metrics: "
        "HTTP 404 (start sglang with --enable-metrics) (== 0 required)"
    )


def test_a_missing_metric_fails_naming_the_rule():
    rule = "sglang:nope_total == 0"
    found = check(f"metrics: {rule}", measured(), measured(metrics_after=METRICS), metrics=(rule,))
    assert not found.passed
    assert first_line(found).startswith("sglang:nope_total: no sample of sglang:nope_total")


def test_a_metrics_rule_that_does_not_parse_fails_with_the_reason():
    rule = "x{a=b} == 0"  # settings' pattern lets it through; its labels are bad
    found = check(f"metrics: {rule}", measured(), measured(metrics_after=METRICS), metrics=(rule,))
    assert not found.passed
    assert found.detail.startswith("metrics rule 'x{a=b} == 0': bad labels")


# compare and describe_failures


def test_compare_runs_every_check_in_order_and_only_filters():
    thresholds = Thresholds(metrics=("x == 0",))
    names = [c.name for c in compare(measured(), measured(stress=load()), thresholds)]
    assert names == [
        "tokens_per_s",
        "accept_length_ratio",
        "greedy_match",
        "error_rate",
        "p95_latency_ratio",
        "health",
        "metrics: x == 0",
    ]
    confirm = frozenset({"tokens_per_s", "greedy_match", "error_rate"})
    only = compare(measured(), measured(stress=load()), thresholds, only=confirm)
    assert [c.name for c in only] == ["tokens_per_s", "greedy_match", "error_rate"]


def test_identical_measurements_pass_every_check():
    checks = compare(measured(), measured(stress=load()), Thresholds())
    assert all(c.passed for c in checks)
    assert describe_failures(checks) == ""


def test_describe_failures_joins_the_first_lines_of_failed_checks():
    new = measured((50.0, 50.0, 50.0), outputs=[None, *OUTPUTS[1:]])
    checks = compare(measured(), new, Thresholds())
    assert describe_failures(checks) == (
        "gate.tokens_per_s: tokens/s 100.0 -> 50.0 (-50.0%), allowed -5.0% (threshold; "
        "noise band 0.0%); gate.greedy_match: 3/4 prompts match (exact); prompt 1/4: no "
        "output from the new request (failed or missing)"
    )


def test_describe_undecided_lists_the_checks_that_need_a_human():
    noisy = measured((90.0, 100.0, 110.0), latencies_s=[0.2])
    checks = compare(noisy, measured((85.0,), latencies_s=[0.2]), Thresholds())
    assert describe_failures(checks) == ""
    assert describe_undecided(checks).startswith(
        "gate.tokens_per_s: tokens/s 100.0 -> 85.0 (-15.0%): inconclusive"
    )
    let_pass = Thresholds(on_inconclusive=Action.PASS)
    assert describe_undecided(compare(noisy, measured((85.0,)), let_pass)) == ""


def test_gate_check_to_dict():
    found = check("greedy_match", measured(), measured())
    assert found.to_dict() == {
        "name": "greedy_match",
        "verdict": "PASS",
        "action": "pass",
        "passed": True,
        "baseline": "4 prompts",
        "new": "4/4 match",
        "limit": "every prompt equal",
        "detail": "4/4 prompts match (exact)",
    }


def test_replays_of_other_prompts_or_lengths_cannot_be_compared():
    base = measured().replace(prompts=[{"text": "a"}], max_new_tokens=32)
    same = compare(base, base.replace(), Thresholds())
    assert "same_replay" not in [c.name for c in same]
    for other in ({"prompts": [{"text": "b"}]}, {"max_new_tokens": 64}):
        checks = compare(base, base.replace(**other), Thresholds())
        assert checks[0].name == "same_replay" and not checks[0].passed
        assert "cannot be compared" in checks[0].detail
    unrecorded = base.replace(prompts=[])  # an older measurement: comparable
    assert "same_replay" not in [c.name for c in compare(unrecorded, base, Thresholds())]
