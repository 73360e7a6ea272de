"""The smoke op runs its suites one after another and, at the same time, its `beside`
suites (SmokeArgs.beside), one process each: those come back as the answer a smoke op of
their own would give and never fail this one. The real agent bundle on a temp host
(tests/agent/conftest.py), suites that are small stdlib scripts.

Running at the same time is proved without timing: the suites meet (each leaves a marker
and waits for the others' before it passes). A suite alone gives up after `patience_s` and
fails, which is what the negative controls show.
"""

from __future__ import annotations

import textwrap

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host import wire
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import SmokeResult

# Leaves `meet/<suite>`, waits for `meet/<name>` of every name in `wait_for` (at most
# patience_s), passes when every one came (and not `fail`).
MEET = textwrap.dedent(
    """\
    import json, os, sys, time
    data = json.load(sys.stdin)
    meet, me = data["meet"], data["suite"]
    open(os.path.join(meet, me), "w").close()
    deadline = time.monotonic() + data["patience_s"]
    waiting = [n for n in data["wait_for"] if n != me]
    while not all(os.path.exists(os.path.join(meet, n)) for n in waiting):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    met = [n for n in waiting if os.path.exists(os.path.join(meet, n))]
    passed = met == waiting and not data.get("fail")
    check = {"name": "met", "passed": passed, "detail": "met %s of %s" % (met, waiting)}
    with open(os.environ["DDTREE_SMOKE_RESULT"], "w") as fh:
        json.dump({"passed": passed, "checks": [check]}, fh)
    """
)


def suite(name: str, meet, wait_for, patience_s: float = 60, **more) -> wire.SmokeSuite:
    data = {"meet": str(meet), "suite": name, "wait_for": list(wait_for), "patience_s": patience_s}
    return wire.SmokeSuite(name=name, source=MEET, input={**data, **more}, timeout_s=120)


def smoke(*suites: wire.SmokeSuite, beside=()) -> Op:
    return Op.of(wire.SmokeArgs(suites=list(suites), beside=list(beside)))


def test_the_suites_run_one_after_another_in_the_order_asked(fake_host, tmp_path):
    """The negative control of running at once: two suites never meet, the first fails."""
    names = ["a", "b"]
    answer = fake_host.call_ops(smoke(*(suite(n, tmp_path, names, patience_s=1) for n in names)))
    assert answer.failed is not None and answer.failed.code == Code.SMOKE_FAILED
    assert answer.failed.error.startswith("smoke failed: a: met: met [] of ['b']")
    result = SmokeResult.from_dict(answer.failed.data)
    assert [(r["suite"], r["passed"]) for r in result.suites] == [("a", False), ("b", True)]
    assert result.beside is None and "beside" not in answer.failed.data


def test_a_suite_beside_runs_with_each_of_them_and_answers_as_its_own_op(fake_host, tmp_path):
    # the suite beside meets the first suite and the last: it runs the whole time
    first, last = suite("imports", tmp_path, ["imports", "server"]), suite("ddtree", tmp_path, [])
    beside = suite("server", tmp_path, ["imports", "ddtree"])
    answer = fake_host.call_ops(smoke(first, last, beside=[beside]))
    assert answer.ok, answer
    result = answer.result_as("smoke", SmokeResult)
    assert [r["suite"] for r in result.suites] == ["imports", "ddtree"]  # not the beside one
    entry = result.beside
    assert entry is not None
    assert {k: entry[k] for k in ("op", "ok", "error", "code")} == {
        "op": "smoke", "ok": True, "error": None, "code": None,
    }  # fmt: skip
    assert [r["suite"] for r in entry["data"]["suites"]] == ["server"]
    assert entry["data"]["suites"][0]["passed"] and "beside" not in entry["data"]
    assert entry["duration_s"] > 0


def test_a_failing_suite_beside_fails_only_its_own_answer(fake_host, tmp_path):
    names = ["imports", "server"]
    beside = suite("server", tmp_path, names, fail=True)
    answer = fake_host.call_ops(smoke(suite("imports", tmp_path, names), beside=[beside]))
    assert answer.ok, answer
    entry = answer.result_as("smoke", SmokeResult).beside
    assert entry is not None and not entry["ok"] and entry["code"] == Code.SMOKE_FAILED
    assert entry["error"].startswith("smoke failed: server: met: met ['imports']")
    # and a failing suite of the op's own still fails it, the beside answer carried along
    both = smoke(suite("imports", tmp_path, names, fail=True), beside=[beside])
    failed = fake_host.call_ops(both).failed
    assert failed is not None and failed.error.startswith("smoke failed: imports: ")
    assert SmokeResult.from_dict(failed.data).beside["error"].startswith("smoke failed: server")


def test_two_suites_of_one_name_must_be_one_script(fake_host, tmp_path):
    same = suite("server", tmp_path, ["server"])
    other = wire.SmokeSuite(name="server", source="raise SystemExit(1)\n", input={})
    answer = fake_host.call_ops(smoke(same, beside=[other]))
    assert answer.failed is not None and answer.failed.code == Code.BAD_ARGS
    assert "two suites named 'server' differ" in answer.failed.error
    # the same script under one name (a patchset that runs `server` before the restart too)
    alike = fake_host.call_ops(smoke(same, beside=[same]))
    assert alike.ok and alike.result_as("smoke", SmokeResult).beside["ok"]


def test_the_oldest_host_python_runs_a_suite_beside_too(oldest_host, tmp_path):
    names = ["a", "c"]
    answer = oldest_host.call_ops(
        smoke(suite("a", tmp_path, names), beside=[suite("c", tmp_path, names)])
    )
    assert answer.ok, answer
    result = answer.result_as("smoke", SmokeResult)
    assert [r["suite"] for r in result.suites] == ["a"] and result.beside["ok"]
