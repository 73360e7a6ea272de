"""A serving-gate check's result in words, as the gate table and the Markdown summary show
it: the check's verdict (gate/verdict.py) and, for INCONCLUSIVE and NO_DATA, what the
thresholds made it do. Reads the JSON-ready check (GateCheck.to_dict); a check written
before verdicts existed has only `passed`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddtree_deploy.results import HostResult

_DID = {"pass": "passed", "fail": "failed", "needs_human": "needs a human"}


def verdict_words(check: Mapping[str, Any], observed: bool) -> str:
    """Return "passed", "FAILED", or e.g. "INCONCLUSIVE (needs a human)", "NO DATA
    (failed)"; with " (observe: not rolled back)" after a check that stopped nothing
    because the gate ran in observe mode."""
    passed = bool(check.get("passed"))
    verdict = str(check.get("verdict") or ("PASS" if passed else "FAIL"))
    if verdict == "PASS":
        words = "passed"
    elif verdict == "FAIL":
        words = "FAILED"
    else:
        did = _DID.get(str(check.get("action")), "failed")
        words = f"{verdict.replace('_', ' ')} ({did})"
    if observed and not passed:
        words += " (observe: not rolled back)"
    return words


def verdict_style(check: Mapping[str, Any]) -> str:
    """The Rich style of a check's result: green passed, yellow needs a human, red failed."""
    if check.get("passed"):
        return "green"
    return "yellow" if check.get("action") == "needs_human" else "red"


def gate_checks(result: HostResult) -> list[dict[str, Any]]:
    """The serving gate's checks a host result carries (details["gate"]["checks"])."""
    gate = result.details.get("gate")
    return list(gate.get("checks") or []) if gate else []


def gate_observed(result: HostResult) -> bool:
    """Whether the host's gate ran in observe mode (--gate observe): its failed checks
    were reported, and nothing was rolled back because of them."""
    gate = result.details.get("gate")
    return bool(gate and gate.get("observe"))
