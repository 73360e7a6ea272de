"""The protocol's names are defined once (wire.OpName, wire.JournalState) and are the very
strings on the wire; the op answers typed in wire_outcomes.py and wire_capture.py keep the
keys (and their order) of the dicts they replaced, in every shape an op answers."""

from __future__ import annotations

import json

import pytest

from ddtree_deploy.agent import AgentRequest, Op, OpResult
from ddtree_deploy.agent.host import main, wire
from ddtree_deploy.agent.host.wire import JournalState, OpName
from ddtree_deploy.agent.host.wire_capture import EditableRefusal, VersionRefusal
from ddtree_deploy.agent.host.wire_container import ContainerFacts
from ddtree_deploy.agent.host.wire_outcomes import (
    CompileResult,
    DriftedFile,
    DriftRefusal,
    DriftResult,
    HealthResult,
    InstallResult,
    JournalAppended,
    LeftoverProcess,
    LockRefusal,
    LockReleased,
    LockTaken,
    ProgressMark,
    Pruned,
    RestartResult,
    Restored,
    RestoreFailure,
    ServiceFailure,
    ServicesResult,
    ServiceState,
)
from ddtree_deploy.agent.host.wire_results import LockRecord
from ddtree_deploy.stages import op_builders as ops

LOCK = LockRecord(run_id="r1", holder="ann@ctl pid 7")
GPU = "GPU check skipped: no nvidia-smi on the host"
LEFTOVER = LeftoverProcess(pid=7, cmdline="sglang::scheduler", why="orphaned sglang", gpu_mib=9)
MARK = ProgressMark(after_s=1.5, pattern="Load weight", line="Load weight end")
EDITED = DriftedFile(file="a.py", expected_sha256="a", found_sha256=None, original_sha256="c")
CONTAINER = ContainerFacts("sglang", "docker", "c0ffee", "img:1", "sha256:1", True, 42, "now")


def test_every_op_has_its_arguments_and_its_function() -> None:
    assert set(wire.OP_ARGS) == set(main.OPS) == set(OpName)


@pytest.mark.parametrize("name", [*OpName, *JournalState])
def test_a_name_is_its_json_value_however_it_is_written(name: wire.OpName) -> None:
    value = name.value
    assert name == value and hash(name) == hash(value) and {value: 1}[name] == 1
    assert f"{name}" == str(name) == "%s" % name == value  # noqa: UP031 - the agent uses %
    assert json.dumps({name: [name]}) == json.dumps({value: [value]})


def test_a_request_and_an_answer_carry_op_names_as_plain_strings() -> None:
    request = AgentRequest(state_dir="/s", ops=[ops.journal_op("d1", JournalState.COMMITTED)])
    sent = json.loads(request.model_dump_json())
    assert sent["ops"] == [
        {"op": "journal", "args": {"entry": {"deploy_id": "d1", "state": "committed"}}}
    ]
    answer = OpResult.model_validate({"op": "restore", "ok": True})
    assert answer.op is OpName.RESTORE
    assert Op.of(wire.PruneArgs(keep=2)).op is OpName.PRUNE


def test_an_unknown_op_or_state_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="format_disk"):
        Op(op="format_disk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'done' is not a valid JournalState"):
        ops.journal_op("d1", "done")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "plain"),
    [
        (LockTaken(LOCK), {"lock": LOCK}),
        (LockTaken(LOCK, reentered=True), {"lock": LOCK, "reentered": True}),
        (LockRefusal(None), {"lock": None}),
        (LockReleased(True), {"released": True}),
        (LockReleased(False, LOCK), {"released": False, "lock": LOCK}),
        (
            JournalAppended({"deploy_id": "d1", "state": "committed"}, None, "disk full"),
            {
                "entry": {"deploy_id": "d1", "state": "committed"},
                "rotated": None,
                "rotate_error": "disk full",
            },
        ),  # fmt: skip
        (Pruned(["d0"], ["d1"]), {"removed": ["d0"], "kept": ["d1"]}),
        (DriftRefusal([EDITED]), {"drift": [EDITED]}),
        (
            RestoreFailure({"a.py": "restored", "b.py": "failed"}, [], None),
            {"files": {"a.py": "restored", "b.py": "failed"}, "drift": [], "drift_saved": None},
        ),
        (
            Restored({"a.py": "restored"}, "/s/backups/d1", [], None, ["c.py"]),
            {
                "files": {"a.py": "restored"},
                "backup": "/s/backups/d1",
                "drift": [],
                "drift_saved": None,
                "unchecked": ["c.py"],
            },
        ),  # fmt: skip
        (
            ServicesResult([ServiceState("gpu0", "systemd", None, "HTTP 200")]),
            {
                "services": [
                    {"name": "gpu0", "kind": "systemd", "running": None, "health": "HTTP 200"}
                ]
            },
        ),  # fmt: skip
        # install, compile, drift: one shape each, every key always sent
        (InstallResult(["a.py", "b.py"]), {"installed": ["a.py", "b.py"]}),
        (CompileResult(2), {"compiled": 2}),
        (
            DriftResult(None, [], [], None, []),
            {"deploy_id": None, "drift": [], "unchecked": [], "error": None, "files": []},
        ),
        (
            DriftResult("d1", [EDITED], ["c.py"], None, ["a.py", "c.py"]),
            {
                "deploy_id": "d1",
                "drift": [EDITED],
                "unchecked": ["c.py"],
                "error": None,
                "files": ["a.py", "c.py"],
            },
        ),  # fmt: skip
        # restart: skipped (kind none), stopped, restarted (clean or after ending
        # leftovers), a container's restart (relay.py)
        (RestartResult(skipped=True), {"skipped": True}),
        (RestartResult(stopped=True, service="gpu0"), {"stopped": True, "service": "gpu0"}),
        (
            RestartResult(restarted=True, service="service", gpu=GPU),
            {"restarted": True, "service": "service", "gpu": GPU},
        ),
        (
            RestartResult(restarted=True, service="s", leftovers_ended=[LEFTOVER], gpu=GPU),
            {"restarted": True, "service": "s", "leftovers_ended": [LEFTOVER], "gpu": GPU},
        ),
        (
            RestartResult(restarted=True, container=CONTAINER),
            {"restarted": True, "container": CONTAINER.to_dict()},
        ),
        # health: skipped, or healthy
        (HealthResult(skipped=True), {"skipped": True}),
        (
            HealthResult(healthy=True, polls=4, progress=[MARK], service="service"),
            {"healthy": True, "polls": 4, "progress": [MARK], "service": "service"},
        ),
        # restart_failed: a command's exit, leftovers refused, a container's restart
        # (its runtime's exit, then not running); unhealthy: the service's, a container's
        (
            ServiceFailure(output="exit 1", log="tail", service="gpu0"),
            {"output": "exit 1", "log": "tail", "service": "gpu0"},
        ),
        (
            ServiceFailure(leftovers=[LEFTOVER], gpu=GPU),
            {"leftovers": [LEFTOVER], "gpu": GPU},
        ),
        (ServiceFailure("exit 125", "tail"), {"output": "exit 125", "log": "tail"}),
        (ServiceFailure(log="tail"), {"log": "tail"}),
        (
            ServiceFailure(log="tail", progress=[MARK], service="service"),
            {"log": "tail", "progress": [MARK], "service": "service"},
        ),
        # the edits op's refusals
        (VersionRefusal("0.5.9"), {"installed": "0.5.9"}),
        (EditableRefusal(None), {"package_root": None}),
    ],
)
def test_a_typed_answer_sends_the_keys_the_dict_did(record: wire.Record, plain: dict) -> None:
    sent = record.to_dict()
    assert json.dumps(sent) == json.dumps(plain)  # the same keys, in the same order
    assert type(record).from_dict(json.loads(json.dumps(sent))) == record
