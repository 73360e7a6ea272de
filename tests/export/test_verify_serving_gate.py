"""`export oci --verify --verify-serve-args` on a REAL Docker daemon, the serving gate: the
BASE image's sglang serves DFLASH as the operator runs it (their args), is measured (the
push's `baseline`), removed; the exported image's sglang serves DDTREE (the patchset's
[serve] flags merged over the same args), passes the server suite, and is measured and
compared with the base by the push's quick gate (`canary`).

The negative control is the push's gate fixture `greedy` (sandbox/ddtree_sandbox/
gate_fixtures.py: tree mask dropped, no [lossless]), which passes every suite in the image,
the server suite included, and changes the greedy output: the gate refuses it, exit 1,
nothing written, no container left. Measured (2026-12-05, 2 cores under load): base DFLASH
74.7 tok/s, accept 1.08; the fixture's DDTREE 122.0 tok/s, accept 1.17; "gate.greedy_match
FAILED: 1/8 prompts match (exact); prompt 1/8: first difference at token 21: 23 (baseline)
vs 26 (new)"; 203 s. The fixture `slow` (~3x fewer tokens/s than 1.1.0) is no control
here: against a DFLASH base that is itself slower than DDTREE on this target it comes out
near -46%, inside the CPU thresholds below and the gate's 50% noise cap (the push's own
gate tests compare it with 1.1.0: tests/serving/test_gate.py). The speed control here is
`crawl` (~10x fewer tokens/s than 1.1.0, the same tokens): it passes the server suite's
lossless gate and must fail the gate's tokens/s comparison with the base image's server.
Measured (2026-12-05, quiet machine, 434 s): base DFLASH 139.1 tok/s, accept 1.08; crawl's
server suite 8/8 identical, accept 1.17; "gate.tokens_per_s FAILED: tokens/s 139.1 -> 8.5
(-93.9%), allowed -50.0%", p95 latency 0.248 s -> 4.565 s (x18.44): far outside any
allowance whatever the load.

Heavy (two sglang CPU servers in containers a case, minutes each under load): serving_full.
"""

from __future__ import annotations

import json

import pytest

from ddtree_deploy.patchset import resolve_patchset
from ddtree_deploy.stages import prepare_patchset
from tests.export.conftest import PATCHSETS, RUNNABLE
from tests.export.test_verify import leftovers, serving_flags, verify_export

pytestmark = pytest.mark.hosts  # root, the sandbox's sglang envs and its private dockerd

# Sized for tiny CPU servers as the sandbox inventory's [defaults.gate] (REAL_SERVER_GATE:
# DDTREE's CPU cost against DFLASH allowed, tokens/s -50%, p95 latency x2); the rest default.
GATE_TOML = """[gate]
max_new_tokens = 32
rounds = 3
warmup_requests = 2
request_timeout_s = 10
max_tokens_per_s_regression = 0.5
max_p95_latency_ratio = 2.0
prompts = "prompts.jsonl"
"""
FAILS = {"greedy": "greedy_match", "crawl": "tokens_per_s"}  # fixture -> the check that catches it


@pytest.mark.serving_full
@pytest.mark.parametrize("variant", [None, "greedy", "crawl"], ids=["good", "greedy", "crawl"])
def test_verify_gates_the_images_server_against_the_base_images(
    runnable_images, sandbox_envs, docker_daemon, scratch, variant
):
    from ddtree_sandbox.gate_fixtures import build_gate_patchset

    version, layout = RUNNABLE[0]  # 0.5.13.post1, site-packages
    env = sandbox_envs[version]
    patchsets = scratch / "patchsets" if variant else PATCHSETS
    source = PATCHSETS / "ddtree" / "1.1.0"
    ref = build_gate_patchset(source, patchsets, variant) if variant else "ddtree@1.1.0"
    prompts = prepare_patchset(resolve_patchset(PATCHSETS, "ddtree@1.1.0")).gate_prompts
    gate_dir = scratch / "gate"
    gate_dir.mkdir()
    (gate_dir / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (gate_dir / "gate.toml").write_text(GATE_TOML)

    extra = serving_flags(env, version, algorithm=True)  # the base serves DFLASH
    extra += ["--verify-gate-config", str(gate_dir / "gate.toml")]  # --verify-gate quick
    out = scratch / "out"
    image = runnable_images[(version, layout)]
    done = verify_export(image, ref, out, docker_daemon.host_url, env, patchsets, extra)
    print(done.stderr[-4000:])  # the suites' and the gate's lines, for `pytest -s`
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    verify = summary["verify"]
    ran = {s["suite"]: s for s in verify["suites"]}
    assert ran["server"]["passed"] is True, (ran, done.stderr[-4000:])  # not the suite's catch
    checks = {c["name"]: c for c in verify["gate"]["checks"]}
    assert {"tokens_per_s", "accept_length_ratio", "greedy_match", "error_rate"} <= set(checks)
    assert "verify baseline" in done.stderr and "verify canary: gate." in done.stderr
    if variant is None:
        assert done.returncode == 0, done.stderr[-4000:]
        assert all(c["passed"] for c in checks.values()), checks
        assert "8/8" in checks["greedy_match"]["detail"]  # DDTREE's output is the base's
        assert (out / "image.tar").is_file()
    else:
        assert done.returncode == 1, done.stderr[-4000:]
        assert checks[FAILS[variant]]["passed"] is False, checks
        assert f"gate.{FAILS[variant]}" in done.stderr and "nothing written" in done.stderr
        assert not out.exists()
    assert sorted(p.name for p in scratch.iterdir()) == sorted(
        ["gate", *(["out"] if variant is None else []), *(["patchsets"] if variant else [])]
    )
    containers, tags = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers and "ddtree-verify-base" not in tags
