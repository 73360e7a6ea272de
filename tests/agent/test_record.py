"""The wire records' base (agent/host/record.py): what `@dataclass(frozen=True)` gave them,
without the dataclasses machinery an agent paid for at every start."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import ClassVar

import pytest

from ddtree_deploy.agent import agent_command
from ddtree_deploy.agent.host import wire, wire_bundle
from ddtree_deploy.agent.host.record import FrozenRecordError, Record, WireError, field
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.agent.protocol import bundle
from tests.agent.bare import request_line


class Point(Record):
    NESTED = ()  # a plain class attribute: not a field
    LIMIT: ClassVar[int] = 3  # a ClassVar: not a field
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


class Point3(Point):
    z: float = 1.5


def test_fields_defaults_and_construction():
    assert Point.FIELDS == ("x", "y", "tags") and Point3.FIELDS == ("x", "y", "tags", "z")
    assert Point(1) == Point(x=1, y=0, tags=[]) == Point(1, 0, [])
    first, second = Point(1), Point(2)
    first.tags.append("a")
    assert second.tags == [] and "tags" not in Point.__dict__  # a fresh list per record
    assert Point3(1, z=2.0).z == 2.0 and Point3(1).z == 1.5
    for bad, said in [
        (lambda: Point(), "missing field 'x'"),
        (lambda: Point(1, 2, [], 4), "takes 3 fields, 4 given"),
        (lambda: Point(1, x=2), "got field 'x' twice"),
        (lambda: Point(1, LIMIT=2), "has no field 'LIMIT'"),
    ]:
        with pytest.raises(TypeError, match=said):
            bad()


def test_frozen_equal_hashable_and_shown_like_a_frozen_dataclass():
    p = Point(1, 2)
    with pytest.raises(FrozenRecordError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):  # FrozenRecordError is one, as FrozenInstanceError
        del p.y  # type: ignore[misc]
    assert p != Point3(1, 2) and p != (1, 2, []) and Point(1, 2) == p
    assert repr(p) == "Point(x=1, y=2, tags=[])"
    assert hash(wire.RestoreArgs("d")) == hash(wire.RestoreArgs(deploy_id="d"))
    with pytest.raises(TypeError):  # a list field makes it unhashable, as a dataclass
        hash(p)
    assert p.replace(y=5) == Point(1, 5) and p == Point(1, 2)
    with pytest.raises(TypeError, match="has no field 'w'"):
        p.replace(w=1)


def test_a_field_without_a_default_after_one_with_is_refused_at_definition():
    with pytest.raises(TypeError, match="field 'b' without a default follows 'a'"):

        class Bad(Record):
            a: int = 1
            b: int


def test_from_dict_and_to_dict_are_strict_and_plain():
    assert Point.from_dict({"x": 1}) == Point(1)
    with pytest.raises(WireError, match="where: unknown key 'LIMIT'"):
        Point.from_dict({"x": 1, "LIMIT": 2}, "where")
    with pytest.raises(WireError, match="Point: missing key 'x'"):
        Point.from_dict({"y": 1})
    plan = wire.CheckPlanArgs.from_dict(
        {"package": "p", "target_version": None, "files": [{"path": "a", "result_sha256": "s"}]}
    )
    assert plan.files == [wire.FileSpec(path="a", result_sha256="s")]
    assert plan.to_dict()["files"] == [
        {"path": "a", "result_sha256": "s", "base_sha256": None, "upgrade_sha256": []}
    ]  # OMIT_IF_NONE left diff and content_b64 out
    with pytest.raises(WireError, match="missing key 'python'"):
        Facts.from_dict({"serve": None})


def _agent_imports(sources: dict[str, str], tmp_path) -> set[str]:
    """The modules one agent start imports (its `-X importtime` report) while it answers
    one empty request."""
    argv = agent_command(sys.executable)
    argv[1:1] = ["-X", "importtime"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        argv,
        input=wire_bundle.pack_bundle(sources) + request_line(tmp_path, []).encode(),
        capture_output=True,
        timeout=60,
        env=env,
        cwd="/",
    )
    lines = done.stderr.decode().splitlines()
    return {line.rpartition("|")[2].strip() for line in lines if line.startswith("import time:")}


def test_an_agent_start_loads_no_dataclasses(tmp_path):
    imported = _agent_imports(bundle(), tmp_path)
    assert "ddtree_agent.wire_service" in imported  # the probe sees the records load
    assert "dataclasses" not in imported
    # Control: a bundle module that imports dataclasses shows up in the same probe.
    sources = dict(bundle())
    sources["ddtree_agent.wire"] = "import dataclasses\n" + sources["ddtree_agent.wire"]
    assert "dataclasses" in _agent_imports(sources, tmp_path)
