"""The serving gate on REAL sglang servers: a good DDTree passes against the host's own
DFLASH baseline; a patch that accepts fewer drafts, serves slower, changes the greedy
text or hangs after N requests passes every one-shot check and is caught by the gate,
rolled back, and the old server confirmed back at its baseline.

The shared sandbox (conftest.py): host0 serves the fp32 target, host1 the control target
(its drafts are always right: DFLASH accepts 4 tokens a step). The fixtures are in
sandbox/ddtree_sandbox/gate_fixtures.py.
"""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from ddtree_sandbox.gate_fixtures import GATE_VARIANTS
from ddtree_sandbox.hosts import SERVICE_PORT
from tests.serving.ddtree_probes import GLUE_PROBE
from tests.serving.serving import (
    Serving,
    assert_serves_ddtree,
    events,
    listener_cmdline,
    summary,
)

pytestmark = pytest.mark.hosts

# Over the sandbox inventory's own [defaults.gate] (inventory_file.REAL_SERVER_GATE: sized
# for tiny CPU servers, DDTree's CPU cost allowed: tokens/s -50%, p95 latency x2); the other
# thresholds are the defaults.
GATE: dict[str, Any] = {
    # sglang exports a counter only once it moved (num_aborted_requests_total appears at the
    # first abort): a rule on a counter that must exist
    "metrics": ["delta(sglang:num_requests_total) >= 24"],  # the replay alone sends 26
}


# The `gate` re-check of the good push runs minutes after the baselines were measured, on 2
# shared cores whose load may change several-fold meanwhile (a loaded run: host1's p95 0.127 s
# at the push, 0.492 s at the re-check, x3.86): its speed allowances are wide; the doctored
# control below (100x) lies far past both.
RECHECK: dict[str, Any] = {**GATE, "max_tokens_per_s_regression": 0.8, "max_p95_latency_ratio": 8.0}


def gate_checks(stdout: str, stage: str = "canary") -> dict[str, dict[str, dict]]:
    """host -> check name -> the check, from the `data.gate` of the JSON Lines."""
    found: dict[str, dict[str, dict]] = {}
    for e in events(stdout):
        gate = (e.get("data") or {}).get("gate")
        if e["event"] == "info" and e["stage"] == stage and gate:
            found.setdefault(e["host"], {})[gate["name"]] = gate
    return found


def stage_events(stdout: str, host: str) -> list[str]:
    return [f"{e['stage']} {e['event']}" for e in events(stdout) if e["host"] == host]


def push(serving: Serving, host: str, version: str, mode: str) -> tuple[tuple[str, ...], dict]:
    args = ("push", "-H", host, "-p", f"ddtree@{version}", "--gate", mode, "--json")
    return args, {"gate": GATE}


# How much faster the doctored baseline is than the measurement it is made from, taken just
# before: -99% tokens/s and p95 x100 stay FAIL (past the 50% band cap, past x2 x 1.5) even if
# the server ran 40x faster at the check than at that recording (measured: up to 6.9x).
DOCTOR_FACTOR = 100


def assert_rolled_back_to_baseline(serving: Serving, stdout: str, host: str) -> None:
    """Rolled back, the rollback's replay confirmed the baseline, the host as it was."""
    assert summary(stdout)[host]["data"]["outcome"] == "rolled_back", summary(stdout)[host]
    confirmed = gate_checks(stdout, "rollback")[host]
    assert set(confirmed) == {"rollback.tokens_per_s", "rollback.greedy_match",
                              "rollback.error_rate"}  # fmt: skip
    assert all(c["passed"] for c in confirmed.values()), confirmed
    serving.assert_pristine(host)


def test_a_good_ddtree_passes_the_full_gate_against_its_dflash_baseline(serving, tmp_path):
    """Pristine DFLASH -> push ddtree 1.1.0 (its flags travel with it) -> DDTREE, lossless,
    as good as the DFLASH baseline the push saved -> `gate` -> rollback -> DFLASH with its
    old flags, byte for byte. (test_real_server.py's 1.1.0 push, make test-serving only,
    checks the same at other budgets.)"""
    plan = serving.cli("plan", "--all", "-p", "ddtree@1.1.0")
    assert plan.returncode == 0, plan.stderr[-3000:]
    shown = " ".join(plan.stdout.split())  # the flags that change, not all of them
    assert "--speculative-algorithm DFLASH -> DDTREE" in shown, plan.stdout[-3000:]
    assert "+ --speculative-ddtree-budget 8" in shown

    junit = tmp_path / "push.xml"
    done = serving.cli("push", "--all", "-p", "ddtree@1.1.0", "--gate", "full", "--json",
                       "--junit", str(junit), gate=GATE)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    found = gate_checks(done.stdout)
    for host in ("host0", "host1"):
        checks = found[host]
        assert set(checks) == {
            "tokens_per_s", "accept_length_ratio", "greedy_match", "error_rate",
            "p95_latency_ratio", "health", f"metrics: {GATE['metrics'][0]}",
        }, checks  # fmt: skip
        assert all(c["passed"] for c in checks.values()), checks
        assert "8/8" in checks["greedy_match"]["detail"], checks["greedy_match"]
        order = stage_events(done.stdout, host)
        assert order.index("baseline ok") < order.index("install ok")
        assert order.index("verify ok") < order.index("canary ok") < order.index("commit ok")
    # DDTREE accepts more drafts than DFLASH on the target; both shown, old vs new
    accept = found["host0"]["accept_length_ratio"]
    assert accept["baseline"] and accept["new"] and float(accept["new"]) > float(accept["baseline"])
    assert "serving gate" in done.stderr and "gate.tokens_per_s" in done.stderr
    cases = {c.get("name") for c in ET.parse(junit).getroot().iter("testcase")}
    assert {"gate.tokens_per_s", "gate.greedy_match", "gate.health"} <= cases
    assert_serves_ddtree(serving, done.stdout, budget=8)  # the patchset's own budget
    host = serving.host("host0")
    glue = host.run(f"{host.python} -c {shlex.quote(GLUE_PROBE)}", timeout_s=300)
    assert glue.returncode == 0 and "glue ok" in glue.stdout, glue.stdout + glue.stderr
    status = serving.cli("status", "--all", "-p", "ddtree@1.1.0")
    assert status.returncode == 0
    assert "DDTREE budget 8" in " ".join(status.stdout.split())

    # `gate`: the host is as good as the baseline its push saved; a doctored baseline is not
    check = serving.cli("gate", "--all", "--gate", "quick", "--record", str(tmp_path / "now"),
                        gate=RECHECK)  # fmt: skip
    assert check.returncode == 0, check.stderr[-3000:]
    assert "as good as its baseline (deploy " in " ".join(check.stderr.split())
    recorded = json.loads((tmp_path / "now" / "host0.json").read_text())
    # A baseline DOCTOR_FACTOR times as fast as the server was at the recording just made,
    # answering in that fraction of the time: FAIL (not INCONCLUSIVE) even if the server runs
    # many times faster now than at the recording (a 3x doctoring once passed at -45.5% on a
    # machine that had sped up 1.6x). -99% tokens/s vs a FAIL past -50%; p95 x100 vs a FAIL
    # past the sandbox's x2 x (1 + a band <= 50%).
    for r in recorded["replay"]["rounds"]:
        r["wall_s"] /= DOCTOR_FACTOR
    recorded["replay"]["latencies_s"] = [
        s / DOCTOR_FACTOR for s in recorded["replay"]["latencies_s"]
    ]
    faster = tmp_path / "faster.json"
    faster.write_text(json.dumps(recorded))
    slower = serving.cli("gate", "-H", "host0", "--gate", "quick", "--baseline", str(faster),
                         "--json", gate=GATE)  # fmt: skip
    assert slower.returncode == 1, slower.stderr[-3000:]
    judged = gate_checks(slower.stdout)["host0"]
    assert judged["tokens_per_s"]["verdict"] == "FAIL", judged["tokens_per_s"]
    assert judged["p95_latency_ratio"]["verdict"] == "FAIL", judged["p95_latency_ratio"]
    assert judged["greedy_match"]["passed"], judged["greedy_match"]  # only speed doctored

    back = serving.cli("rollback", "--all")
    assert back.returncode == 0, back.stderr[-3000:]
    for name in ("host0", "host1"):
        serving.assert_pristine(name)  # files and serve flags byte for byte, DFLASH served
        cmdline = listener_cmdline(serving.host(name).address, SERVICE_PORT)
        assert "--speculative-algorithm DFLASH" in cmdline


# make test-serving only (CI time, 77 s): make test keeps the tokens/s check failing on a
# doctored baseline (first test above) as the serving gate's control
@pytest.mark.serving_full
def test_fewer_accepted_drafts_are_caught_and_rolled_back(serving):
    """host1: the budget clamped to 1 (lossless, accept length 4 -> 2)."""
    clamp = GATE_VARIANTS["clamp"].version
    on_host1 = serving.cli(*push(serving, "host1", clamp, "quick")[0], gate=GATE)
    assert on_host1.returncode == 1, on_host1.stderr[-4000:]
    checks = gate_checks(on_host1.stdout)["host1"]
    assert not checks["accept_length_ratio"]["passed"], checks
    assert checks["greedy_match"]["passed"]  # still lossless: only the gate can see it
    assert "gate.accept_length_ratio" in summary(on_host1.stdout)["host1"]["message"]
    assert_rolled_back_to_baseline(serving, on_host1.stdout, "host1")


# make test-serving only (CI time: everything after the restart runs about 4x slower, 260 s);
# make test proves the same tokens/s check fails on a doctored baseline (first test above)
@pytest.mark.serving_full
def test_a_slower_server_is_caught_and_rolled_back(serving):
    """host0: a sleep in verify (lossless, same accept length, fewer tokens/s)."""
    slow = GATE_VARIANTS["slow"].version
    on_host0 = serving.cli(*push(serving, "host0", slow, "quick")[0], gate=GATE)
    assert on_host0.returncode == 1, on_host0.stderr[-4000:]
    checks = gate_checks(on_host0.stdout)["host0"]
    assert not checks["tokens_per_s"]["passed"], checks
    assert checks["greedy_match"]["passed"] and checks["accept_length_ratio"]["passed"]
    assert "verify ok" in stage_events(on_host0.stdout, "host0")
    assert_rolled_back_to_baseline(serving, on_host0.stdout, "host0")


@pytest.mark.serving_full  # make test-serving only (CI time: 161 s)
def test_changed_greedy_text_and_a_hang_after_n_requests_are_caught(serving):
    """host0: the tree mask dropped in a patchset without [lossless] (the push compares no
    outputs); host1: a server that hangs after 40 requests: it passes the one-shot verify
    and the replay, and fails under the load of the bake."""
    greedy, hang = GATE_VARIANTS["greedy"].version, GATE_VARIANTS["hang"].version
    on_host0, on_host1 = serving.cli_together(
        push(serving, "host0", greedy, "quick"), push(serving, "host1", hang, "full")
    )
    assert on_host0.returncode == 1, on_host0.stderr[-4000:]
    checks = gate_checks(on_host0.stdout)["host0"]
    assert not checks["greedy_match"]["passed"], checks
    assert "first difference at token" in checks["greedy_match"]["detail"]
    assert "verify ok" in stage_events(on_host0.stdout, "host0")
    assert_rolled_back_to_baseline(serving, on_host0.stdout, "host0")

    assert on_host1.returncode == 1, on_host1.stderr[-4000:]
    order = stage_events(on_host1.stdout, "host1")
    assert "verify ok" in order and "canary fail" in order
    checks = gate_checks(on_host1.stdout)["host1"]
    assert checks["tokens_per_s"]["passed"] and checks["greedy_match"]["passed"]  # the replay
    assert not checks["error_rate"]["passed"], checks
    assert "timed out" in checks["error_rate"]["detail"], checks["error_rate"]
    assert_rolled_back_to_baseline(serving, on_host1.stdout, "host1")


def test_bad_gate_settings_are_refused_before_any_change(serving):
    before = serving.host("host0").tree_digest()
    done = serving.cli("push", "-H", "host0", "-p", "ddtree@1.1.0", "--gate", "quick",
                       gate={**GATE, "greedy_match": "roughly"})  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "greedy_match 'roughly'" in done.stderr
    assert serving.host("host0").tree_digest() == before
