"""Smoke suite results in words (pure): one line per suite, one line per failed push; the
pipeline puts them in its events, the report shows them."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.agent import AgentResponse, OpResult
from ddtree_deploy.agent.host.wire import Code, OpName
from ddtree_deploy.agent.host.wire_results import SmokeResult

# Checks a passing suite names with what they measured, so a reader sees the gate had teeth.
HEADLINE_CHECKS = ("lossless_sequential", "lossless_concurrent", "acceptance")


def suite_results(result: OpResult) -> list[dict[str, Any]]:
    """Return the suite result lines a smoke op's result carries: every suite's when the op
    ran them (ok, or failed with smoke_failed), else [] (refused, crashed).

    Raises wire.WireError when the data is no SmokeResult.
    """
    if result.ok or result.code == Code.SMOKE_FAILED:
        return result.data_as(SmokeResult).suites
    return []


def beside_answer(result: OpResult) -> AgentResponse | None:
    """Return the answer a smoke op of its own would have given for the suites that ran
    beside this (passed) smoke op's (SmokeArgs.beside), or None when none ran beside it or
    what came back cannot be read as one (the caller then sends them on their own)."""
    try:
        entry = result.data_as(SmokeResult).beside if result.ok else None
        answer = OpResult.model_validate(entry) if entry is not None else None
    except ValueError:  # WireError, pydantic's ValidationError
        return None
    if answer is None or answer.op != OpName.SMOKE:
        return None
    return AgentResponse(ok=answer.ok, results=[answer])


def describe_suite(suite: dict[str, Any]) -> str:
    """Return one line for a suite result: `name: verdict (passed/total checks)[: why]`.

    `why`, for a suite that did not pass: its failed checks as `check: summary` (the first
    line of each detail), else the suite's own details; at most 300 characters.
    """
    checks = suite.get("checks") or []
    passed = sum(1 for c in checks if c.get("passed"))
    verdict = "skipped" if suite.get("skipped") else "passed" if suite.get("passed") else "FAILED"
    line = f"{suite.get('suite', '?')}: {verdict} ({passed}/{len(checks)} checks)"
    if verdict == "passed":
        shown = [summarize_check(c) for c in checks if c.get("name") in HEADLINE_CHECKS]
        return f"{line}: {'; '.join(shown)}" if shown else line
    failed = [summarize_check(c) for c in checks if not c.get("passed")]
    why = "; ".join(failed) or str(suite.get("details") or "")
    return f"{line}: {why[:300]}" if why else line


def describe_smoke_failure(suites: list[dict[str, Any]]) -> str:
    """Return which check of which failed suite failed, on what and why, in one line.

    One `suite: check: summary` per failed suite (its first failed check, `(+N more)` when
    others failed too), joined by `; `; "" when no suite failed. Example:
    `server: lossless_sequential: prompt 3/8: first difference at token 17: expected 5, got 12`.
    """
    parts = []
    for suite in suites:
        if suite.get("passed") or suite.get("skipped"):
            continue
        failed = [c for c in suite.get("checks") or [] if not c.get("passed")]
        if failed:
            more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
            why = summarize_check(failed[0])[:240] + more
        else:  # no result line: timed out, crashed
            why = str(suite.get("details") or "failed").splitlines()[0][:240]
        parts.append(f"{suite.get('suite', '?')}: {why}")
    return "; ".join(parts)


def summarize_check(check: dict[str, Any]) -> str:
    """Return `name: first line of its detail` (just the name when it has no detail)."""
    lines = str(check.get("detail") or "").strip().splitlines()
    return f"{check.get('name', '?')}: {lines[0]}" if lines else str(check.get("name", "?"))
