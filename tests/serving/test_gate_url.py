"""`gate --url` against a REAL sglang server (the shared serving sandbox's host0), measured
from the controller: record a baseline, pass against it, fail against a doctored one
(negative control), refuse bad input. No host or agent is involved."""

from __future__ import annotations

import json

import pytest

from ddtree_sandbox.hosts import SERVICE_PORT
from tests.serving.serving import Serving
from tests.support import run_cli

pytestmark = pytest.mark.hosts


def gate_url(serving: Serving, *args: str):
    url = f"http://{serving.host('host0').address}:{SERVICE_PORT}"
    common = ["gate", "--url", url, "--gate", "quick", "--patchsets-dir", str(serving.patchsets)]
    return run_cli(*common, *args, timeout=600)


def test_gate_url_records_passes_and_catches_a_changed_output(serving, tmp_path):
    baseline = tmp_path / "baseline.json"
    done = gate_url(serving, "-p", "ddtree@1.1.0", "--record", str(baseline))
    assert done.returncode == 0, done.stderr
    recorded = json.loads(baseline.read_text())
    assert recorded["replay"]["requests"] > 0 and recorded["replay"]["errors"] == 0

    # the same server against its own recording: every correctness check passes. Speed is
    # judged at the default 5% (no inventory here), which a loaded machine's drift between
    # the two measurements can exceed: a speed check may be INCONCLUSIVE (exit 3) or even
    # FAIL (exit 1) there, and the exit code must say which (never a flip of this test)
    done = gate_url(serving, "--baseline", str(baseline))
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    checks = {c["name"]: c for c in verdict["checks"]}
    assert "greedy_match" in checks, done.stdout + done.stderr
    speed = {"tokens_per_s", "p95_latency_ratio"}
    assert all(c["verdict"] == "PASS" for n, c in checks.items() if n not in speed), checks
    verdicts = {c["verdict"] for c in checks.values()}
    expected = 1 if "FAIL" in verdicts else 3 if "INCONCLUSIVE" in verdicts else 0
    assert done.returncode == expected, done.stdout + done.stderr
    assert verdict["ok"] == (expected == 0) and verdict["needs_human"] == (expected == 3)

    # negative control: the same server against a baseline whose first greedy output
    # differs by one token fails the greedy check (exit 1)
    doctored = json.loads(baseline.read_text())
    first = doctored["replay"]["outputs"][0]
    first[-1] = first[-1] + 1
    bad = tmp_path / "doctored.json"
    bad.write_text(json.dumps(doctored))
    done = gate_url(serving, "--baseline", str(bad))
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    failed = [c["name"] for c in verdict["checks"] if c["verdict"] == "FAIL"]
    assert "greedy_match" in failed


def test_gate_url_bad_input_is_exit_2(serving, tmp_path):
    assert gate_url(serving, "--baseline", str(tmp_path / "missing.json")).returncode == 2
    done = gate_url(serving)  # neither a baseline nor something to record
    assert done.returncode == 2 and "--baseline" in done.stderr
    done = run_cli("gate", "--url", "ftp://x", "--baseline", __file__)
    assert done.returncode == 2 and "expected http" in done.stderr
