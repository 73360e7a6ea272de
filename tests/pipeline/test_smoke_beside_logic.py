"""A push records the lossless reference beside its pre-restart suites (one request), and
what a user sees is what the earlier path showed: the same events in the same order, the
same results, the same failures and rollbacks (a scripted agent, no SSH, no root).

`PushOptions.reference_apart` (bench only) is that earlier path: the reference a request of
its own after the suites. On real hosts: bench/scenario_verified.py (every gate) and
tests/serving; the agent's side: tests/agent/test_smoke_beside.py.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache

import pytest

from ddtree_deploy.agent import AgentRequest, OpResult
from ddtree_deploy.agent.host import wire
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.pipeline import PushOptions, push_host
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset, prepare_patchset
from tests.pipeline.fakehost import Scene, make_host, passed_suites, result_named, scene
from tests.support import REPO

SUITE_SOURCES = dict.fromkeys(("integrity", "compile", "imports", "ddtree", "gpu", "server"), "")
BESIDE = PushOptions(holder="tester@ctl pid 1", smoke_sources=SUITE_SOURCES)
APART = dataclasses.replace(BESIDE, reference_apart=True)
PRE_RESTART = ["integrity", "compile", "imports", "ddtree", "gpu"]


@cache
def prepared(version: str) -> PreparedPatchset:
    return prepare_patchset(load_patchset(REPO / "patchsets" / "ddtree" / version))


def serve_host():
    service = ServiceSpec(
        kind="command", start="/bin/true", stop="/bin/true", args_file="/etc/sglang/serve.env"
    )
    return make_host(service)


def push(opts: PushOptions, version: str = "1.1.0", **script) -> tuple[Scene, HostResult]:
    s = scene(serve_host() if version == "1.1.0" else None, **script)
    result = push_host(s.run, prepared(version), opts)
    s.check_events_paired()
    return s, result


def smoke_args(request: AgentRequest) -> list[wire.SmokeArgs]:
    return [wire.SmokeArgs.from_dict(op.args) for op in request.ops if op.op == "smoke"]


def seen(s: Scene, result: HostResult) -> list[str]:
    """Every event as the JSON a user reads (no time stamps or durations), then the
    result; the deploy id (random) as <id>."""
    lines = [
        json.dumps([e.stage, e.event, e.message, e.data], sort_keys=True, default=str)
        for e in s.events
    ]
    lines.append(json.dumps([result.outcome, result.message, result.details], default=str))
    return [line.replace(result.deploy_id, "<id>") if result.deploy_id else line for line in lines]


def test_the_reference_rides_beside_the_suites():
    s, result = push(BESIDE)
    assert result.outcome == Outcome.OK
    smokes = [args for r in s.fake.requests for args in smoke_args(r)]
    # the smoke requests: before the restart one (not two), then verify's after it
    assert [[x.name for x in a.suites] for a in smokes] == [PRE_RESTART, ["server"]]
    (beside,) = smokes[0].beside
    assert beside.name == "server" and beside.input["options"]["lossless"]["mode"] == "record"
    assert not smokes[1].beside


def test_the_serial_path_sends_what_it_sent_before():
    s, result = push(APART)
    assert result.outcome == Outcome.OK
    smokes = [args for r in s.fake.requests for args in smoke_args(r)]
    assert [[x.name for x in a.suites] for a in smokes] == [PRE_RESTART, ["server"], ["server"]]
    assert not any(a.beside for a in smokes)
    assert smokes[1].suites[0].input["options"]["lossless"]["mode"] == "record"


@pytest.mark.parametrize(
    "beside, apart, fewer",
    [
        pytest.param({}, {}, 1, id="every-gate-passes"),
        pytest.param(
            {"smoke:beside": "reference_failed"},
            {"smoke": [None, "reference_failed"]},
            1,
            id="reference-fails-push-goes-on",
        ),
        pytest.param({"smoke": "smoke_failed"}, {"smoke": "smoke_failed"}, 0, id="smoke-fails"),
        pytest.param(
            {"smoke": [None, "verify_failed"]},
            {"smoke": [None, None, "verify_failed"]},
            1,
            id="verify-fails",
        ),
        pytest.param({"restart": "restart_failed"}, {"restart": "restart_failed"}, 1, id="restart"),
    ],
)
def test_a_user_sees_what_the_serial_path_showed(beside, apart, fewer):
    s_new, new = push(BESIDE, **beside)
    s_old, old = push(APART, **apart)
    assert seen(s_new, new) == seen(s_old, old)
    # past smoke, one round trip fewer: the reference came with the suites
    assert len(s_new.fake.sent) == len(s_old.fake.sent) - fewer


def test_a_failing_suite_still_rolls_the_push_back_and_no_reference_is_reported():
    """The negative control: a suite fails, so the push rolls back; the reference that ran
    beside it (the agent's failure carries its answer too) is not reported."""
    failed = result_named("smoke_failed")
    reference = OpResult(op="smoke", ok=True, data={"suites": passed_suites([{"name": "server"}])})
    failed.data["beside"] = reference.model_dump()
    s, result = push(BESIDE, smoke=failed)
    assert result.outcome == Outcome.ROLLED_BACK
    assert result.message.startswith("smoke failed: imports: import: sglang.srt.speculative")
    assert "reference" not in s.stages("start") and "restart" not in s.stages("start")
    assert s.stages()[-6:] == [
        "smoke start", "smoke fail", "rollback start", "rollback ok", "unlock start", "unlock ok",
    ]  # fmt: skip


def test_an_unreadable_answer_beside_sends_the_reference_on_its_own():
    odd = OpResult(op="facts", ok=True, data={})  # not a smoke op's answer
    s, result = push(BESIDE, **{"smoke:beside": odd})
    assert result.outcome == Outcome.OK
    smokes = [args for r in s.fake.requests for args in smoke_args(r)]
    assert [[x.name for x in a.suites] for a in smokes] == [PRE_RESTART, ["server"], ["server"]]
    assert "reference ok" in s.stages()


def test_without_a_reference_nothing_rides_beside_the_suites():
    s, result = push(BESIDE, version="1.0.0")
    assert result.outcome == Outcome.OK
    (args,) = [a for r in s.fake.requests for a in smoke_args(r) if a.suites[0].name != "server"]
    assert not args.beside
    assert "reference" not in s.stages("start")
