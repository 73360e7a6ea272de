"""A command refused before any host (bad input, exit 2) still writes what CI reads: one JSON
Lines event (stage `input`), a JUnit file with one failed case and a --summary-file section,
each naming the error. Real CLI processes; no host is contacted."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support import run_cli

# name -> (arguments before the outputs, the error's text)
CASES = {
    "missing_inventory": (["push", "-i", "{tmp}/none.toml", "--all"], "inventory file not found"),
    "unknown_patchset": (
        ["push", "-i", "{tmp}/inv.toml", "--all", "-p", "nosuch", "--patchsets-dir", "{tmp}"],
        "no patchset named 'nosuch'",
    ),
    "unknown_host": (["plan", "-i", "{tmp}/inv.toml", "-H", "ghost"], "ghost"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_input_error_writes_event_junit_and_summary(tmp_path: Path, case: str) -> None:
    (tmp_path / "inv.toml").write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    args, said = CASES[case]
    junit, summary = tmp_path / "out" / "junit.xml", tmp_path / "summary.md"
    summary.write_text("### an earlier step\n\n")  # appended to, never replaced
    outputs = ["--json", "--junit", str(junit), "--summary-file", str(summary)]
    done = run_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args), *outputs)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and done.stderr.startswith("error: ")
    (line,) = done.stdout.splitlines()  # exactly one event
    event = json.loads(line)
    assert (event["host"], event["stage"], event["event"]) == ("", "input", "fail")
    assert said in event["message"] and event["data"]["exit_code"] == 2
    assert event["data"]["command"] == args[0]
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    (failure,) = suite.iter("failure")
    assert said in failure.get("message", "") and said in (failure.text or "")
    text = summary.read_text()
    assert text.startswith("### an earlier step\n\n### ddtree-deploy " + args[0])
    assert "refused before any host (exit 2)" in text and said in text


def test_a_local_command_honours_the_root_outputs(tmp_path: Path) -> None:
    """`patchset verify` of a missing version with the root's --json: one event too."""
    done = run_cli("--json", "patchset", "verify", "ddtree@9.9.9", "--patchsets-dir", str(tmp_path))
    assert done.returncode == 2
    event = json.loads(done.stdout)
    assert event["data"]["command"] == "patchset verify" and "not found" in event["message"]


def test_without_outputs_only_the_error_line(tmp_path: Path) -> None:
    """Negative control: asked for no output, a refusal writes only its error on stderr."""
    done = run_cli("push", "-i", str(tmp_path / "none.toml"), "--all")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []
