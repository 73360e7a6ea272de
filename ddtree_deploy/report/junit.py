"""JUnit XML: one testcase per host x stage (or host x smoke suite)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ddtree_deploy.pipeline import HostResult


def junit_xml(name: str, results: list[HostResult]) -> str:
    suite = ET.Element("testsuite", name=name)
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in results:
        cases = [(rec.stage, rec.ok, rec.skipped, rec.duration_s, rec.message) for rec in r.records]
        for s in r.details.get("suites") or []:
            cases.append(
                (
                    f"smoke.{s.get('suite')}",
                    bool(s.get("passed")),
                    bool(s.get("skipped")),
                    float(s.get("duration_s") or 0),
                    str(s.get("details", "")),
                )
            )
        for stage, ok, skipped, duration_s, message in cases:
            case = ET.SubElement(
                suite, "testcase", classname=r.host, name=stage, time=f"{duration_s:.3f}"
            )
            counts["tests"] += 1
            if skipped:
                ET.SubElement(case, "skipped", message=message)
                counts["skipped"] += 1
            elif not ok:
                ET.SubElement(case, "failure", message=message[:1000]).text = message
                counts["failures"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def write_junit(path: Path, name: str, results: list[HostResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(name, results), encoding="utf-8")
