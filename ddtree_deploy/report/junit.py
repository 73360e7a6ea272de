"""JUnit XML: one testcase per host x stage, one `smoke.<suite>` case per suite run and one
`gate.<check>` case per serving-gate check (skipped, saying it would have failed, for a
failed check under --gate observe)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ddtree_deploy.report.clean import clean_text
from ddtree_deploy.report.gate_verdict import gate_checks, gate_observed
from ddtree_deploy.results import HostResult

_MESSAGE_CHARS = 1000


def suite_results(result: HostResult) -> list[dict[str, Any]]:
    """Return the smoke suite results a host result carries: `smoke` puts them in
    details["suites"]; a push that failed in smoke/verify keeps them in the failure data."""
    suites = result.details.get("suites")
    if suites:
        return list(suites)
    failure = result.details.get("failure")
    data = failure.get("data") if failure else None
    return list(data.get("suites") or []) if isinstance(data, dict) else []


def _suite_failure_text(suite: dict[str, Any]) -> str:
    """Every failed check as `name: detail`, else the suite's own details."""
    failed = [c for c in suite.get("checks") or [] if not c.get("passed")]
    if failed:
        return "\n".join(f"{c.get('name')}: {c.get('detail', '')}" for c in failed)
    return str(suite.get("details") or "failed")


def junit_xml(name: str, results: list[HostResult]) -> str:
    suite = ET.Element("testsuite", name=name)
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in results:
        cases = [
            (str(rec.stage), rec.ok, rec.skipped, rec.duration_s, rec.message, rec.message)
            for rec in r.records
        ]
        for s in suite_results(r):
            cases.append(
                (
                    f"smoke.{s.get('suite')}",
                    bool(s.get("passed")),
                    bool(s.get("skipped")),
                    float(s.get("duration_s") or 0),
                    str(s.get("details") or ""),
                    _suite_failure_text(s),
                )
            )
        observe = gate_observed(r)
        for check in gate_checks(r):
            detail = str(check.get("detail") or "")
            summary = detail.splitlines()[0] if detail else ""
            # observe mode: a failed check stopped nothing; it is reported, not failed
            observed = observe and not check.get("passed")
            if observed:
                summary = f"observe mode, not rolled back: would have failed: {summary}"
            cases.append(
                (
                    f"gate.{check.get('name')}",
                    bool(check.get("passed")),
                    observed,
                    0.0,
                    summary,
                    detail,
                )
            )
        for stage, ok, skipped, duration_s, raw_message, raw_text in cases:
            # a host's escapes are no text (and most control characters are no XML either)
            message, text = clean_text(raw_message), clean_text(raw_text)
            case = ET.SubElement(
                suite, "testcase", classname=r.host, name=stage, time=f"{duration_s:.3f}"
            )
            counts["tests"] += 1
            if skipped:
                ET.SubElement(case, "skipped", message=message[:_MESSAGE_CHARS])
                counts["skipped"] += 1
            elif not ok:
                ET.SubElement(case, "failure", message=message[:_MESSAGE_CHARS]).text = text
                counts["failures"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def write_junit(path: Path, name: str, results: list[HostResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(name, results), encoding="utf-8")
