"""report/retry.py: which hosts `push --retry FILE` runs again, read from what `push --json`
wrote. The files are made by the real writer (JsonLinesSink over a real rollout whose hosts
never touch the network), so writer and reader cannot drift apart."""

from __future__ import annotations

import io
import json

import pytest

from ddtree_deploy.fleet import RolloutPolicy, run_rollout
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.report import JsonLinesSink
from ddtree_deploy.report.refusal import refusal_event
from ddtree_deploy.report.retry import read_retry_plan
from ddtree_deploy.results import HostResult, Outcome

# host -> how the fake push ends it
ENDS = {
    "a": Outcome.OK,
    "b": Outcome.ROLLED_BACK,
    "c": Outcome.NO_CHANGES,
    "d": Outcome.NEEDS_ATTENTION,
    "e": Outcome.LOCKED,
    "f": Outcome.REFUSED,
}


def push_output(
    ends: dict[str, Outcome], command: str = "push", run_id: str = "run1", **policy: int
) -> str:
    """What `COMMAND --json` writes for a rollout whose hosts end as `ends` says."""

    def fake_push(run: HostRun) -> HostResult:
        return run.result(ends[run.host.name], "done", deploy_id=f"d-{run.host.name}")

    stream = io.StringIO()
    sink = JsonLinesSink(stream, command=command)
    hosts = [Host(name=name, address="127.0.0.1") for name in ends]
    run_rollout(hosts, fake_push, run_id, sink, RolloutPolicy(parallel=1, **policy))
    return stream.getvalue()


def test_retry_picks_exactly_the_hosts_that_did_not_end_ok():
    plan = read_retry_plan(push_output(ENDS).splitlines())
    assert plan.hosts == ("b", "d", "e", "f")  # not a (ok) nor c (no_changes)
    assert plan.run_id == "run1" and plan.outcomes["a"] == Outcome.OK


def test_hosts_a_stopped_fleet_never_started_are_retried():
    ends = {"a": Outcome.ROLLED_BACK, "b": Outcome.OK, "c": Outcome.OK}
    plan = read_retry_plan(push_output(ends, canary=1).splitlines())
    assert plan.outcomes == {
        "a": Outcome.ROLLED_BACK,
        "b": Outcome.NOT_STARTED,
        "c": Outcome.NOT_STARTED,
    }
    assert plan.hosts == ("a", "b", "c")


def test_control_a_run_where_every_host_ended_ok_retries_none():
    ends = {"a": Outcome.OK, "b": Outcome.NO_CHANGES}
    assert read_retry_plan(push_output(ends).splitlines()).hosts == ()


def test_a_file_of_several_runs_is_read_for_its_last():
    first = push_output({"a": Outcome.ROLLED_BACK, "b": Outcome.ROLLED_BACK}, run_id="r1")
    second = push_output({"a": Outcome.OK, "b": Outcome.LOCKED}, run_id="r2")
    plan = read_retry_plan((first + second).splitlines())
    assert plan.run_id == "r2" and plan.hosts == ("b",) and plan.runs_in_file == 2


def test_a_hosts_last_summary_is_its_word():
    lines = push_output({"a": Outcome.OK}).splitlines()
    later = json.loads(lines[-1])
    later["data"]["outcome"] = "rolled_back"  # as after an undo
    plan = read_retry_plan([*lines, json.dumps(later)])
    assert plan.hosts == ("a",)


@pytest.mark.parametrize(
    "text, said",
    [
        ("", "no host summary in it"),
        ("hello\n", "line 1: not JSON"),
        ("[1, 2]\n", "line 1: not a JSON object"),
        ('{"schema_version": 99}\n', "line 1: event schema_version 99"),
        ('{"schema_version": 1, "host": "a"}\n', "line 1: not a ddtree-deploy event: ts"),
    ],
)
def test_what_is_not_a_push_output_is_named(text, said):
    with pytest.raises(ValueError, match=said):
        read_retry_plan(text.splitlines())


def test_another_commands_output_is_refused():
    text = push_output({"a": Outcome.FAILED}, command="status")
    with pytest.raises(ValueError, match="written by `status` .*not `push`"):
        read_retry_plan(text.splitlines())


def test_an_output_that_names_no_command_is_refused():
    text = push_output({"a": Outcome.ROLLED_BACK}, command="")
    with pytest.raises(ValueError, match="names no command"):
        read_retry_plan(text.splitlines())


def test_a_refused_push_has_no_host_to_retry():
    line = refusal_event("push", "inv.toml: unknown host 'ghost'").model_dump_json()
    with pytest.raises(ValueError, match="`push` refused before any host .*ghost"):
        read_retry_plan([line])


def test_the_writer_names_the_command_only_on_summary_lines():
    lines = [json.loads(x) for x in push_output({"a": Outcome.OK}).splitlines()]
    assert [x["data"]["command"] for x in lines if x["stage"] == "summary"] == ["push"]
    assert all("command" not in (x["data"] or {}) for x in lines if x["stage"] != "summary")
