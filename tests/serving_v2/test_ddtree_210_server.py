"""ddtree 2.1.0 (DDTreeWorkerV2) on REAL sglang 0.5.23 servers: lossless, trees accepted,
negative controls that must fail and roll back.

Host tests: two real sshd sandbox hosts with the real sglang 0.5.23 and a real
`python -m sglang.launch_server` (CPU, fp32, the tiny models of sandbox/make_models.py), first
serving DFLASH on DFlashWorkerV2 with the overlap scheduler on. host0 serves the target, host1
the control target (zero LM head: every draft is right). The tests run in order on the same
hosts (conftest.py); each one leaves them as it found them.
"""

from __future__ import annotations

import json
import re
import tomllib
import urllib.request

import pytest

from ddtree_sandbox.broken import V2_VARIANTS
from ddtree_sandbox.hosts import SERVICE_PORT
from ddtree_sandbox.inventory_file import render_toml
from tests.serving.serving import checks, get_json, listener_cmdline, server_suites, summary
from tests.serving.test_real_server import accept_length
from tests.support import REPO, copy_patchset

pytestmark = pytest.mark.hosts

LOSSLESS = ("reference", "lossless_sequential", "lossless_concurrent", "acceptance")
PROMPT = [11, 9, 15, 5, 4, 8, 11, 5, 11]


def generate(host, **sampling: object) -> dict:
    """POST /generate on ``host``: 32 tokens of PROMPT with greedy or ``sampling`` params,
    token logprobs returned."""
    body = {
        "input_ids": PROMPT,
        "sampling_params": {"max_new_tokens": 32, "temperature": 0, **sampling},
        "return_logprob": True,
    }
    request = urllib.request.Request(
        f"http://{host.address}:{SERVICE_PORT}/generate",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def token_logprobs(reply: dict) -> list[tuple[int, float]]:
    return [(int(t), float(lp)) for lp, t, _ in reply["meta_info"]["output_token_logprobs"]]


def server_log(serving_v2, name: str) -> str:
    log = serving_v2.host(name).service_dir_on_disk / "server.log"
    return log.read_text(errors="replace")


def assert_pristine(serving_v2, name: str) -> None:
    host = serving_v2.host(name)
    assert serving_v2.serve_file(name) == serving_v2.pristine_serve[name]
    assert host.tree_digest() == serving_v2.pristine_tree[name]
    assert get_json(host, "/server_info")["speculative_algorithm"] == "DFLASH"


def push_serves_losslessly(serving_v2, version: str) -> dict:
    """Push ddtree@`version` to both hosts and check what every ddtree push here must show:
    the server gate's lossless checks passed on each host (8/8 in flight), DDTREE served at
    budget 8. Returns the server suites by host."""
    pushed = serving_v2.cli("push", "--all", "-p", f"ddtree@{version}", "--json")
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    suites = server_suites(pushed.stdout)
    assert set(suites) == {"host0", "host1"}, pushed.stdout[-3000:]
    for name, suite in suites.items():
        found = checks(suite)
        assert all(found[c]["passed"] for c in LOSSLESS), (name, found)
        assert "8/8" in found["lossless_concurrent"]["detail"].splitlines()[0]
        info = get_json(serving_v2.host(name), "/server_info")
        assert info["speculative_algorithm"] == "DDTREE", info
        assert info["speculative_ddtree_budget"] == 8, info
    return suites


def test_pristine_0523_hosts_serve_dflash_v2_with_overlap_and_pass_the_gate(serving_v2):
    for host in serving_v2.sandbox.hosts:
        cmdline = listener_cmdline(host.address, SERVICE_PORT)
        assert "-m sglang.launch_server" in cmdline and "DFLASH" in cmdline, cmdline
        assert "--disable-overlap-schedule" not in cmdline
        assert get_json(host, "/server_info")["version"] == "0.5.23"
    done = serving_v2.cli(
        "smoke", "--all", "-p", "ddtree@2.1.0", "--suite", "server", "--json",
        expected_algorithm="DFLASH",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    for name, suite in server_suites(done.stdout, "smoke").items():
        found = checks(suite)
        assert all(found[c]["passed"] for c in LOSSLESS), (name, found)
        serving_v2.dflash_accept[name] = accept_length(found["acceptance"])
    serving_v2.dflash_logprobs = token_logprobs(generate(serving_v2.host("host0")))


def test_push_210_serves_ddtree_trees_losslessly_then_rollback_restores_dflash(serving_v2):
    """Pristine DFLASH -> push ddtree 2.1.0 -> DDTREE on DDTreeWorkerV2 (budget 8: 9 verify
    slots on a 4-token draft block), overlap on, lossless one at a time and 8 in flight, fewer
    verify steps than DFLASH on the target, whole paths accepted on the control target ->
    rollback -> DFLASH with its old flags, byte for byte."""
    suites = push_serves_losslessly(serving_v2, "2.1.0")
    for name in suites:
        host = serving_v2.host(name)
        assert "--disable-overlap-schedule" not in listener_cmdline(host.address, SERVICE_PORT)
        line = "DDTREE: draft block 4, tree budget 8, verify width 9 (DFlashWorkerV2, "
        log = server_log(serving_v2, name)
        assert line + "overlap scheduling on)" in log
        # the workspace is sized once sglang resolved the request count (with the pools)
        sized = re.search(r"DDTREE: verify workspace at (\d+) requests x width 9: ", log)
        assert sized and int(sized.group(1)) >= 1, log[-3000:]
    # The same prompts need fewer verify steps with a tree than with DFLASH's chain.
    ddtree = accept_length(checks(suites["host0"])["acceptance"])
    assert ddtree > serving_v2.dflash_accept["host0"], (ddtree, serving_v2.dflash_accept)
    # Always-right drafts: each step accepts a path of depth 3 (the block's limit) + bonus.
    assert accept_length(checks(suites["host1"])["acceptance"]) >= 3.0
    # Logprobs come from the accepted path's rows (moved to the window's front): the same
    # tokens with the same target logprobs as DFLASH's chain rows.
    ddtree_logprobs = token_logprobs(generate(serving_v2.host("host0")))
    assert [t for t, _ in ddtree_logprobs] == [t for t, _ in serving_v2.dflash_logprobs]
    for (_, ours), (_, chain) in zip(ddtree_logprobs, serving_v2.dflash_logprobs, strict=True):
        assert abs(ours - chain) < 1e-4, (ddtree_logprobs, serving_v2.dflash_logprobs)
    # A sampled request (one lossless sample per tree node) decodes and leaves the server up.
    sampled = generate(serving_v2.host("host0"), temperature=0.8, top_k=8, top_p=0.9)
    assert sampled["meta_info"]["completion_tokens"] >= 1, sampled
    assert get_json(serving_v2.host("host0"), "/server_info")["speculative_algorithm"] == "DDTREE"

    back = serving_v2.cli("rollback", "--all", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    for host in serving_v2.sandbox.hosts:
        assert_pristine(serving_v2, host.name)


@pytest.mark.serving_full
def test_push_212_newest_builder_serves_losslessly_then_rollback(serving_v2):
    """ddtree 2.1.2, the newest 0.5.23 line (2.1.1 with 1.1.12's tree builder, whose heap
    reads only the entries it pops), on the same REAL servers: lossless one at a time and 8 in
    flight, fewer verify steps than DFLASH, whole paths accepted on the control target, then a
    rollback to DFLASH byte for byte."""
    version = "2.1.2"
    copy_patchset(
        REPO / "patchsets" / "ddtree" / version, serving_v2.patchsets / "ddtree" / version
    )
    suites = push_serves_losslessly(serving_v2, version)
    ddtree = accept_length(checks(suites["host0"])["acceptance"])
    assert ddtree > serving_v2.dflash_accept["host0"], (ddtree, serving_v2.dflash_accept)
    assert accept_length(checks(suites["host1"])["acceptance"]) >= 3.0
    back = serving_v2.cli("rollback", "--all", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    for host in serving_v2.sandbox.hosts:
        assert_pristine(serving_v2, host.name)


# Both in make test-serving (CI time: 77 s mask, 96 s kv). make test keeps the same gate's
# control through a real push on 0.5.23: stock 2.1.2 on the hybrid host
# (tests/serving_hybrid/test_hybrid_ddtree.py), caught at its first wrong token.
@pytest.mark.serving_full
@pytest.mark.parametrize("variant", ["mask", "kv"])
def test_a_lossy_210_fails_the_lossless_gate_and_rolls_back(serving_v2, variant):
    """A 2.1.0 bug that imports, starts and serves but changes the output: the tree mask
    dropped, or the accepted path's KV left where verify wrote it (caught only because
    trees get accepted off the chain: a chain's path is at the window's front already)."""
    bug = V2_VARIANTS[variant]
    pushed = serving_v2.cli("push", "-H", "host0", "-p", f"ddtree@{bug.version}", "--json")
    if pushed.returncode == 0:  # the gate missed it: put the host back for the next tests
        serving_v2.cli("rollback", "-H", "host0")
    assert pushed.returncode == 1, pushed.stderr[-4000:]
    message = summary(pushed.stdout)["host0"]["message"]
    assert "lossless" in message and "first difference at token" in message, message
    assert_pristine(serving_v2, "host0")


@pytest.mark.serving_full
def test_push_210_with_the_overlap_scheduler_off_is_lossless_too(serving_v2):
    data = tomllib.loads(serving_v2.sandbox.inventory_path.read_text())
    data["hosts"]["host0"]["serve"]["args"] += ["--disable-overlap-schedule"]
    inventory = serving_v2.workdir / "inventory-no-overlap.toml"
    inventory.write_text(render_toml(data))
    from tests.support import run_cli

    pushed = run_cli(
        "push", "-H", "host0", "-p", "ddtree@2.1.0", "--json", "-i", str(inventory),
        "--patchsets-dir", str(serving_v2.patchsets), timeout=900,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    found = checks(server_suites(pushed.stdout)["host0"])
    assert all(found[c]["passed"] for c in LOSSLESS), found
    assert "overlap scheduling off)" in server_log(serving_v2, "host0")
    back = run_cli("rollback", "-H", "host0", "-i", str(inventory), timeout=900)
    assert back.returncode == 0, back.stderr[-3000:]
    assert_pristine(serving_v2, "host0")
