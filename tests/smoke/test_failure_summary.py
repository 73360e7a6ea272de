"""A failed smoke run says which check failed, on what and why: the one-line summaries."""

from __future__ import annotations

from ddtree_deploy.report import summary_markdown
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages.smoke_results import describe_smoke_failure, describe_suite
from tests.smoke.test_server_suite import (
    fake,
    gate,
    reference_for,
    run_suite,
    serve_model,
    write_model,
)

__all__ = ["fake"]  # the fixture, shared with test_server_suite

FIRST_LINE = "prompt 3/8: first difference at token 17: expected 5, got 12 (7/8 identical)"
LOSSLESS_FAILED = {
    "suite": "server",
    "passed": False,
    "skipped": False,
    "details": "lossless_sequential: prompt 3/8: ...",
    "checks": [
        {"name": "health", "passed": True, "detail": "GET http://h:30000/health_generate: 200"},
        {
            "name": "lossless_sequential",
            "passed": False,
            "detail": FIRST_LINE + "\nPOST http://h:30000/generate, 8 requests in 2.0s:\n...",
        },
        {
            "name": "lossless_concurrent",
            "passed": False,
            "detail": FIRST_LINE,
        },
        {"name": "reference", "passed": True, "skipped": True, "detail": "skipped (not required)"},
    ],
}
TIMED_OUT = {"suite": "ddtree", "passed": False, "details": "timed out after 600s"}
PASSED = {"suite": "imports", "passed": True, "checks": [{"name": "a", "passed": True}]}
SKIPPED = {"suite": "gpu", "passed": False, "skipped": True, "details": "skipped: no GPU"}


def test_failure_names_suite_check_and_the_first_line_of_why():
    assert describe_smoke_failure([PASSED, LOSSLESS_FAILED, SKIPPED, TIMED_OUT]) == (
        "server: lossless_sequential: prompt 3/8: first difference at token 17: expected 5, "
        "got 12 (7/8 identical) (+1 more); ddtree: timed out after 600s"
    )
    assert describe_smoke_failure([PASSED, SKIPPED]) == ""


def test_describe_suite_lists_failed_checks_by_their_summary_line():
    assert describe_suite(LOSSLESS_FAILED) == (
        "server: FAILED (2/4 checks): lossless_sequential: prompt 3/8: first difference at "
        "token 17: expected 5, got 12 (7/8 identical); lossless_concurrent: prompt 3/8: first "
        "difference at token 17: expected 5, got 12 (7/8 identical)"
    )
    assert describe_suite(TIMED_OUT) == "ddtree: FAILED (0/0 checks): timed out after 600s"


def test_a_real_suite_failure_reads_well_in_the_summary_table(fake, tmp_path):
    model = write_model(tmp_path / "model")
    serve_model(fake, model)
    reference = reference_for(model)
    reference["outputs"][0]["output_ids"][4] = 100
    _, result = run_suite(fake.url, lossless=gate(references=[reference]))
    why = describe_smoke_failure([result])
    assert why.startswith("server: lossless_sequential: prompt 1/4: first difference at token 4:")
    assert why.endswith("expected 100, got 53 (3/4 identical) (+1 more)")
    # the message push.py's _rollback composes with it: `{op} failed: {why}; rolled back`
    host = HostResult("h1", Outcome.ROLLED_BACK, f"smoke failed: {why}; rolled back")
    [row] = [r for r in summary_markdown("push", [host]).splitlines() if r.startswith("| h1")]
    assert "| smoke failed: server: lossless_sequential: prompt 1/4: first difference" in row
