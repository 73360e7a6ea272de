"""The smoke op runs its suites at once (SmokeArgs.concurrent), one process each, and
answers in the order asked; `beside` suites run with them and come back as the answer a
smoke op of their own would give, never failing this one. The real agent bundle on a temp
host (tests/agent/conftest.py), suites that are small stdlib scripts.

Concurrency is proved without timing: the suites meet (each leaves a marker and waits for
the others' before it passes). A suite alone gives up after `patience_s` and fails, which is
what the one-after-another negative control shows.
"""

from __future__ import annotations

import textwrap

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host import wire
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import SmokeResult

# Leaves `meet/<suite>`, waits for `meet/<name>` of every name in `wait_for` (at most
# patience_s), leaves `meet/<suite>.done` once it has written its result.
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
    open(os.path.join(meet, me + ".done"), "w").close()
    """
)


def suite(name: str, meet, wait_for, patience_s: float = 60, **more) -> wire.SmokeSuite:
    data = {"meet": str(meet), "suite": name, "wait_for": list(wait_for), "patience_s": patience_s}
    return wire.SmokeSuite(name=name, source=MEET, input={**data, **more}, timeout_s=120)


def smoke(*suites: wire.SmokeSuite, concurrent=True, beside=()) -> Op:
    return Op.of(wire.SmokeArgs(suites=list(suites), concurrent=concurrent, beside=list(beside)))


def test_suites_run_at_once_and_answer_in_the_order_asked(fake_host, tmp_path):
    names = ["integrity", "compile", "imports", "ddtree", "gpu"]
    # the first suite named also waits for every other one to finish: it ends last
    first = suite(names[0], tmp_path, [*names, *(f"{n}.done" for n in names[1:])])
    rest = [suite(n, tmp_path, names) for n in names[1:]]
    answer = fake_host.call_ops(smoke(first, *rest))
    assert answer.ok, answer
    result = answer.result_as("smoke", SmokeResult)
    assert [r["suite"] for r in result.suites] == names
    assert all(r["passed"] for r in result.suites)
    assert result.beside is None and "beside" not in answer.results[0].data


def test_one_after_another_they_never_meet(fake_host, tmp_path):
    """The negative control: not concurrent, the first suite waits alone and fails."""
    names = ["a", "b"]
    answer = fake_host.call_ops(
        smoke(*(suite(n, tmp_path, names, patience_s=1) for n in names), concurrent=False)
    )
    assert answer.failed is not None and answer.failed.code == Code.SMOKE_FAILED
    assert answer.failed.error.startswith("smoke failed: a: met: met [] of ['b']")
    result = SmokeResult.from_dict(answer.failed.data)
    assert [(r["suite"], r["passed"]) for r in result.suites] == [("a", False), ("b", True)]


def test_a_failing_suite_still_fails_the_op_with_every_result_in_order(fake_host, tmp_path):
    names = ["integrity", "imports", "ddtree"]
    suites = [suite(n, tmp_path, names, fail=n == "imports") for n in names]
    answer = fake_host.call_ops(smoke(*suites))
    failed = answer.failed
    assert failed is not None and failed.code == Code.SMOKE_FAILED
    assert failed.error.startswith("smoke failed: imports: met: met ['integrity', 'ddtree']")
    result = SmokeResult.from_dict(failed.data)
    assert [(r["suite"], r["passed"]) for r in result.suites] == [
        ("integrity", True), ("imports", False), ("ddtree", True),
    ]  # fmt: skip


def test_a_suite_beside_runs_with_them_and_answers_as_its_own_op(fake_host, tmp_path):
    names = ["imports", "ddtree", "server"]
    mine = [suite(n, tmp_path, names) for n in names[:2]]
    answer = fake_host.call_ops(smoke(*mine, beside=[suite("server", tmp_path, names)]))
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


def test_the_oldest_host_python_runs_them_at_once_too(oldest_host, tmp_path):
    names = ["a", "b", "c"]
    answer = oldest_host.call_ops(
        smoke(*(suite(n, tmp_path, names) for n in names[:2]), beside=[suite("c", tmp_path, names)])
    )
    assert answer.ok, answer
    result = answer.result_as("smoke", SmokeResult)
    assert [r["suite"] for r in result.suites] == ["a", "b"] and result.beside["ok"]
