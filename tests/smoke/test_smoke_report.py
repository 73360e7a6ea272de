"""How smoke results reach people and CI: the table, the per-suite line, JUnit (pure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rich.console import Console

from ddtree_deploy.events import StageRecord
from ddtree_deploy.report import junit_xml, smoke_table
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages.smoke_results import describe_suite

INTEGRITY_FAILED = {
    "suite": "integrity",
    "passed": False,
    "skipped": False,
    "duration_s": 0.02,
    "details": "sglang/a.py: /srv/a.py: sha256 ab != lock cd",
    "checks": [
        {"name": "sglang/a.py", "passed": False, "detail": "/srv/a.py: sha256 ab != lock cd"},
        {"name": "sglang/b.py", "passed": False, "detail": "/srv/b.py: missing [red]"},
        {"name": "sglang/c.py", "passed": True, "detail": "ok"},
    ],
}
GPU_SKIPPED = {"suite": "gpu", "passed": False, "skipped": True, "details": "skipped: no GPU"}


def smoke_result() -> HostResult:
    records = [
        StageRecord("preflight", True, False, 0.1, ""),
        StageRecord("smoke", False, False, 0.5, "smoke failed: integrity"),
    ]
    return HostResult(
        "host0",
        Outcome.FAILED,
        "smoke failed: integrity",
        details={"suites": [INTEGRITY_FAILED, GPU_SKIPPED]},
        records=records,
    )


def test_junit_has_one_case_per_suite_with_every_failed_check():
    root = ET.fromstring(junit_xml("smoke ddtree@1.0.0", [smoke_result()]))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == ["preflight", "smoke", "smoke.integrity", "smoke.gpu"]
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "2", "1")
    failure = cases["smoke.integrity"].find("failure")
    assert failure.get("message") == INTEGRITY_FAILED["details"]
    assert failure.text.splitlines() == [
        "sglang/a.py: /srv/a.py: sha256 ab != lock cd",
        "sglang/b.py: /srv/b.py: missing [red]",
    ]
    assert cases["smoke.gpu"].find("skipped").get("message") == "skipped: no GPU"


def test_junit_reads_suites_from_a_push_rolled_back_in_smoke():
    rolled_back = HostResult(
        "host1",
        Outcome.ROLLED_BACK,
        "smoke failed: smoke failed: integrity; rolled back",
        details={"failure": {"op": "smoke", "code": "smoke_failed", "data": {"suites": [
            INTEGRITY_FAILED
        ]}}},
    )  # fmt: skip
    root = ET.fromstring(junit_xml("push", [rolled_back]))
    assert [c.get("name") for c in root.iter("testcase")] == ["smoke.integrity"]
    no_data = HostResult("host2", Outcome.ROLLED_BACK, "x", details={"failure": {"data": None}})
    assert ET.fromstring(junit_xml("push", [no_data])).get("tests") == "0"


def test_describe_suite_says_verdict_counts_and_what_failed():
    assert describe_suite(INTEGRITY_FAILED).startswith("integrity: FAILED (1/3 checks): sglang/a")
    assert describe_suite(GPU_SKIPPED) == "gpu: skipped (0/0 checks): skipped: no GPU"
    passed = {"suite": "compile", "passed": True, "checks": [{"name": "a", "passed": True}]}
    assert describe_suite(passed) == "compile: passed (1/1 checks)"


def test_table_lists_failed_checks_without_eating_brackets():
    console = Console(width=200, record=True)
    unreachable = HostResult("host1", Outcome.NEEDS_ATTENTION, "unreachable: refused")
    console.print(smoke_table([smoke_result(), unreachable]))
    text = console.export_text()
    assert "/srv/b.py: missing [red]" in text
    assert "1/3" in text and "FAILED" in text and "skipped" in text
    assert "needs_attention" in text and "unreachable: refused" in text
