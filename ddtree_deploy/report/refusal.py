"""The output of a command refused before any host (bad input, exit 2): one JSON Lines
event, one failed JUnit case and one Markdown summary section, each naming the error, so a
CI job that reads only these files still shows why the run did nothing."""

from __future__ import annotations

import datetime
import secrets
import xml.etree.ElementTree as ET
from pathlib import Path

from ddtree_deploy.events import Event, Stage

REFUSED_EXIT_CODE = 2


def refusal_event(command: str, message: str) -> Event:
    """Return the one event of a refused command: no host (""), stage `input`, `fail`."""
    return Event(
        ts=datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        run_id=secrets.token_hex(6),  # the format of pipeline.new_run_id; no run started
        host="",
        stage=Stage.INPUT,
        event="fail",
        message=message,
        data={"command": command, "exit_code": REFUSED_EXIT_CODE},
    )


def refusal_junit(command: str, message: str) -> str:
    """Return a JUnit document with one failed case, `input`, whose message is the error."""
    suite = ET.Element("testsuite", name=command, tests="1", failures="1", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="input", name=command, time="0.000")
    ET.SubElement(
        case, "failure", message=message.splitlines()[0] if message else ""
    ).text = message
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def refusal_markdown(command: str, message: str) -> str:
    """Return the Markdown summary section of a refused command (heading, why, exit code)."""
    fence = "````" if "```" in message else "```"
    return (
        f"### ddtree-deploy {command}\n\n**refused before any host (exit "
        f"{REFUSED_EXIT_CODE}): nothing changed**\n\n{fence}\n{message}\n{fence}\n\n"
    )


def write_refusal(
    command: str, message: str, json_lines: bool, junit: Path | None, summary: Path | None
) -> list[str]:
    """Write the refusal where the command was asked to report: the event on stdout under
    ``json_lines``, the JUnit file, the summary section (appended). Returns one problem line
    per file that could not be written (the refusal itself must still reach the user)."""
    import sys

    from ddtree_deploy.report.summary import append_summary

    problems = []
    if json_lines:
        sys.stdout.write(refusal_event(command, message).model_dump_json() + "\n")
        sys.stdout.flush()
    if junit is not None:
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(refusal_junit(command, message), encoding="utf-8")
        except OSError as exc:
            problems.append(f"--junit {junit}: cannot write: {exc.strerror or exc}")
    if summary is not None:
        try:
            append_summary(summary, refusal_markdown(command, message))
        except OSError as exc:
            problems.append(f"--summary-file {summary}: cannot write: {exc.strerror or exc}")
    return problems
