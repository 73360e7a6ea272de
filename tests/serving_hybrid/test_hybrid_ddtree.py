"""ddtree 2.2.x on a hybrid (Gated DeltaNet) target, REAL sglang 0.5.23 server: 2.2.1 (what
`-p ddtree` gives a 0.5.23 host; 2.2.0 + TP, the same code at tp 1) and 2.2.0 lossless at
budgets 4 and 16, one at a time and 8 in flight, and the negative controls the lossless gate
must catch through a real push (and roll back): stock 2.1.2 (chain scan + chain commit), tree
parents with a chain commit, a chain scan with a tree commit.

Host tests (conftest.py): one sshd host serving the tiny Qwen3.5-text target plain, so the
gate's references come from the host's own plain server (8 prompts x 32 tokens here).
"""

from __future__ import annotations

import pytest

from ddtree_sandbox.broken import HYBRID_VARIANTS
from ddtree_sandbox.hosts import SERVICE_PORT
from tests.serving.serving import (
    accept_length,
    checks,
    get_json,
    listener_cmdline,
    server_suites,
    summary,
)
from tests.serving_hybrid.conftest import TRIMMED

pytestmark = pytest.mark.hosts

LOSSLESS = ("reference", "lossless_sequential", "lossless_concurrent", "acceptance")
# Per-request timeout of the push's smoke suites: the interpreted GDN verify at width 17 with 8
# requests in flight took over the default 60 s on the loaded 2-core machine (2026-12-04).
SLOW = {"timeout_s": 600.0}


def push_22x_serves_losslessly(serving_hybrid, version: str, budget: int) -> float:
    """Push ``version`` (2.2.x) at ``budget``: every lossless check passes (8/8 one at a time and in
    flight), DDTREE served at that budget; rollback to the plain server. Returns the accept
    length the gate ran at."""
    pushed = serving_hybrid.cli(
        "push", "-H", "host0", "-p", f"ddtree@{version}", "--json", budget=budget, **SLOW
    )
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    found = checks(server_suites(pushed.stdout)["host0"])
    assert all(found[c]["passed"] for c in LOSSLESS), found
    every = "{0}/{0}".format(TRIMMED[version][0])  # every prompt of the copy's gate
    assert every in found["lossless_sequential"]["detail"].splitlines()[0], found
    assert every in found["lossless_concurrent"]["detail"].splitlines()[0], found  # in flight
    host = serving_hybrid.host("host0")
    info = get_json(host, "/server_info")
    assert info["speculative_algorithm"] == "DDTREE", info
    assert info["speculative_ddtree_budget"] == budget, info
    assert "--disable-overlap-schedule" not in listener_cmdline(host.address, SERVICE_PORT)
    accept = accept_length(found["acceptance"])
    print(f"ddtree {version} budget {budget} on the hybrid target: {found['acceptance']['detail']}")
    back = serving_hybrid.cli("rollback", "-H", "host0", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    serving_hybrid.assert_pristine("host0")
    return accept


def test_push_221_budget_4_serves_the_hybrid_target_losslessly(serving_hybrid):
    assert push_22x_serves_losslessly(serving_hybrid, "2.2.1", 4) > 1.0  # trees get accepted


@pytest.mark.serving_full
@pytest.mark.parametrize(("version", "budget"), [("2.2.1", 16), ("2.2.0", 4), ("2.2.0", 16)])
def test_push_22x_serves_the_hybrid_target_losslessly(serving_hybrid, version, budget):
    assert push_22x_serves_losslessly(serving_hybrid, version, budget) > 1.0


@pytest.mark.serving_full
def test_dflash_serves_the_hybrid_target_like_plain(serving_hybrid):
    """sglang's own DFLASH (DFlashWorkerV2, chain verify, the fixture's state scatter) on the
    hybrid target: the lossless gate of a push that only switches the algorithm passes 8/8
    one at a time and in flight against the host's plain server; rolled back after."""
    pushed = serving_hybrid.cli(
        "push", "-H", "host0", "-p", "dflash-probe@0.5.23", "--json", **SLOW
    )
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    found = checks(server_suites(pushed.stdout)["host0"])
    assert all(found[c]["passed"] for c in LOSSLESS), found
    assert "8/8" in found["lossless_sequential"]["detail"].splitlines()[0], found
    assert "8/8" in found["lossless_concurrent"]["detail"].splitlines()[0], found
    assert (
        get_json(serving_hybrid.host("host0"), "/server_info")["speculative_algorithm"] == "DFLASH"
    )
    print(f"DFLASH on the hybrid target: {found['acceptance']['detail']}")
    back = serving_hybrid.cli("rollback", "-H", "host0", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    serving_hybrid.assert_pristine("host0")


def assert_lossy_push_caught(serving_hybrid, version: str) -> None:
    pushed = serving_hybrid.cli(
        "push", "-H", "host0", "-p", f"ddtree@{version}", "--json", budget=4, **SLOW
    )
    if pushed.returncode == 0:  # the gate missed it: put the host back for the next tests
        serving_hybrid.cli("rollback", "-H", "host0")
    assert pushed.returncode == 1, pushed.stderr[-4000:]
    message = summary(pushed.stdout)["host0"]["message"]
    print(f"ddtree {version} on the hybrid target: {message}")
    assert "lossless" in message and "first difference at token" in message, message
    serving_hybrid.assert_pristine("host0")


def test_stock_212_serves_the_hybrid_target_wrong_and_the_gate_rolls_it_back(serving_hybrid):
    """2.1.0-2.1.2 neither refuse a hybrid target nor verify it as a tree (chain scan and
    chain commit): wrong tokens, caught by the lossless gate."""
    assert_lossy_push_caught(serving_hybrid, "2.1.2")


@pytest.mark.serving_full
@pytest.mark.parametrize("variant", sorted(HYBRID_VARIANTS))
def test_half_a_hybrid_fix_fails_the_lossless_gate(serving_hybrid, variant):
    assert_lossy_push_caught(serving_hybrid, HYBRID_VARIANTS[variant].version)
