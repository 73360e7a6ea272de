"""op_reports: what restart, health and journal answers say beside ok/failed, as info events
of the stage their op ran in (pipeline logic against a scripted agent; the same lines on a
real sshd host are in test_push_watchdog.py and test_push.py)."""

from __future__ import annotations

from ddtree_deploy.agent import Op, OpResult
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.op_reports import REPORTERS
from ddtree_deploy.results import Outcome
from ddtree_deploy.stages import op_builders as ops
from tests.pipeline.fakehost import scene

LEFTOVER = {"pid": 41, "why": "holds port 30000", "cmdline": "python -m sglang.launch_server"}
GPU = "GPU check skipped: no nvidia-smi on the host"
MARK = {"after_s": 3.5, "pattern": "Load weight", "line": "Load weight end"}


def restarted(**data) -> OpResult:
    return OpResult(op="restart", ok=True, data={"restarted": True, **data}, duration_s=0.2)


def test_the_clean_start_says_what_it_ended_then_sums_up():
    s = scene(restart=restarted(leftovers_ended=[LEFTOVER], gpu=GPU))
    s.run.call([(Stage.RESTART, Op(op="restart"))])
    assert s.infos() == [
        "restart: ended leftover pid 41 (holds port 30000): python -m sglang.launch_server",
        f"restart: clean start: ended 1 leftover processes; {GPU}",
    ]
    assert s.events[-1].event == "ok"


def test_a_clean_start_with_nothing_left_behind_says_so_once():
    s = scene(restart=restarted(gpu=GPU))
    s.run.call([(Stage.RESTART, Op(op="restart"))])
    assert s.infos() == [f"restart: clean start: nothing left behind; {GPU}"]


def test_a_failed_health_still_reports_the_watchdogs_progress():
    failed = OpResult(op="health", ok=False, error="no answer in 900s", data={"progress": [MARK]})
    s = scene(health=failed)
    s.run.call([(Stage.HEALTH, Op(op="health"))])
    assert s.infos() == ["health: after 3.5s: Load weight end"]
    assert (s.events[-1].event, s.events[-1].message) == ("fail", "no answer in 900s")


def test_a_failed_journal_rotation_is_one_warning_per_run():
    said = {"entry": {}, "rotated": None, "rotate_error": "OSError: EROFS"}
    s = scene(**{"journal:committed": [OpResult(op="journal", ok=True, data=said)] * 2})
    entry = ops.journal_op("d1", "committed")
    s.run.call([(Stage.JOURNAL, entry)])
    s.run.call([(Stage.JOURNAL, entry)])
    assert s.infos()[0].startswith("journal: journal not rotated: OSError: EROFS (the entry")
    assert s.run.warnings == ["journal not rotated: OSError: EROFS"]
    assert s.run.result(Outcome.OK).details == {"warnings": s.run.warnings}


def test_a_rotation_that_carried_entries_is_told():
    said = {"entry": {}, "rotated": 12, "rotate_error": None}
    s = scene(**{"journal:committed": OpResult(op="journal", ok=True, data=said)})
    s.run.call([(Stage.JOURNAL, ops.journal_op("d1", "committed"))])
    assert s.infos() == ["journal: journal rotated: 12 entries carried, the old one kept"]
    assert s.run.warnings == []


def test_an_op_without_a_reporter_adds_no_line():
    """Negative control: the same data on an op no reporter is registered for says nothing."""
    assert set(REPORTERS) == {"restart", "health", "journal"}
    other = OpResult(op="install", ok=True, data={"gpu": GPU, "progress": [MARK]})
    s = scene(install=other)
    s.run.call([(Stage.INSTALL, Op(op="install"))])
    assert s.infos() == []
