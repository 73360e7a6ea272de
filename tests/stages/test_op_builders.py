"""The op builders: each builds its op's typed arguments, which the agent parses back."""

from __future__ import annotations

import dataclasses

from ddtree_deploy.agent.host import wire
from ddtree_deploy.gate.settings import GateConfig, resolve
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.patchset.models import ServeConfig, Target
from ddtree_deploy.pipeline.capture import edits_op
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.gate_plan import gate_op
from tests.agent.test_ops_bundle import prepared


def test_every_builder_sends_arguments_the_agent_reads():
    p = dataclasses.replace(
        prepared(), serve=ServeConfig(args=["--speculative-ddtree-budget", "8"])
    )
    service = ServiceSpec(kind="command", start="run --port 1", stop="halt", args_file="/e/s.env")
    host = Host(name="h", address="a", service=service)
    serve = ops.plan_serve_file(host, p)
    built = [
        ops.facts_op(host, p),
        ops.check_plan_op(p, "r1", True, serve),
        ops.lock_op("r1", "me@ctl pid 9", 60.0, pid=9, controller="ctl"),
        ops.unlock_op("r1"),
        ops.journal_op("d1", "installing", run_id="r1"),
        ops.backup_op("d1", "/site", p, serve),
        ops.install_op("/site", p, "d1", serve),
        ops.compile_op("/site", p),
        ops.smoke_op(host, "/site", p, {"integrity": "print()", "_suite.py": ""}, 30.0),
        *[op for _, op in ops.service_ops(host)],
        ops.services_op(host),
        ops.restore_op("d1", force=True),
        ops.drift_op(),
        ops.prune_op(3),
        ops.history_op(7),
        gate_op(host, resolve(GateConfig(bake_s=5), ({"text": "hi"},)), "after", load=True),
        edits_op(Target(package="sglang", version="0.5.13.post1")),
    ]
    typed = {op.op: op.typed_args() for op in built}
    assert set(typed) == set(wire.OP_ARGS)
    assert typed["lock_acquire"].pid == 9 and typed["lock_acquire"].controller == "ctl"
    assert typed["facts"].serve_path == "/e/s.env"
    assert typed["restore"].force and typed["drift"].deploy_id is None
    assert typed["history"].deploys == 7
    results = typed["backup"].results  # what a restore compares to tell a hand edit
    assert results == {f.path: f.result_sha256 for f in p.files} | {serve.path: serve.sha256}
    plan, install = typed["check_plan"], typed["install"]
    assert plan.serve.content_b64 is None and install.serve.content_b64  # bytes only to install
    assert all(f.diff is None and f.content_b64 is None for f in plan.files)
    assert install.files[0].diff and install.files[1].content_b64
    assert typed["restart"].service.start == ["run", "--port", "1"]  # argv: no shell
    assert typed["smoke"].support == {"_suite.py": ""}
    assert [s.name for s in typed["smoke"].suites] == ["integrity"]
    assert ops.service_ops(Host(name="n", address="b")) == []
    assert ops.services_op(Host(name="n", address="b")) is None
    assert [s.name for s in typed["services"].services] == ["service"]
    edits = typed["edits"]
    assert (edits.package, edits.target_version) == ("sglang", "0.5.13.post1")
    assert edits.max_file_bytes == 2 * 1024 * 1024  # the patchset's own limit per file
    gate = typed["gate_measure"]
    assert (
        gate.bake_s == 5 and gate.load_requests == 32 and gate.health_url == host.service.health_url
    )
    assert gate.prompts == [{"text": "hi"}] and gate.server_url == "http://127.0.0.1:30000"


def test_isolated_imports_reaches_the_suite_from_the_inventory_or_the_flag():
    from ddtree_deploy.cli.options import with_isolated_imports
    from ddtree_deploy.inventory.models import SmokeSpec

    p = dataclasses.replace(prepared(), import_timeout_s=42.0)
    plain = Host(name="h", address="a")
    keyed = Host(name="k", address="b", smoke=SmokeSpec(isolated_imports=True))

    def imports_options(host: Host) -> dict:
        suites = ops.smoke_op(host, "/site", p, {"imports": "print()"}, 30.0).typed_args().suites
        return suites[0].input["options"]["imports"]

    assert imports_options(plain) == {"isolated": False, "timeout_s": 42.0}
    assert imports_options(keyed) == {"isolated": True, "timeout_s": 42.0}
    flagged = with_isolated_imports([plain, keyed], True)
    assert [imports_options(h)["isolated"] for h in flagged] == [True, True]
    assert with_isolated_imports([plain], False) == [plain]


def _two_services(stagger_s: float | None) -> Host:
    one = ServiceSpec(kind="command", name="gpu0", start="a", stop="b")
    two = ServiceSpec(kind="systemd", unit="sglang@1.service")
    return Host(name="h", address="a", services=(one, two), stagger_s=stagger_s)


def test_several_services_restart_in_order_each_healthy_before_the_next():
    pairs = ops.service_ops(_two_services(None))
    shown = [(stage, op.typed_args().service.name) for stage, op in pairs]
    assert shown == [
        ("restart", "gpu0"),
        ("health", "gpu0"),
        ("restart", "sglang@1.service"),
        ("health", "sglang@1.service"),
    ]
    assert all(op.typed_args().after_s == 0 for stage, op in pairs if stage == "restart")


def test_staggered_services_start_apart_then_answer_health():
    pairs = ops.service_ops(_two_services(7.5))
    shown = [(stage, op.typed_args().service.name) for stage, op in pairs]
    assert shown == [
        ("restart", "gpu0"),
        ("restart", "sglang@1.service"),
        ("health", "gpu0"),
        ("health", "sglang@1.service"),
    ]
    assert [op.typed_args().after_s for stage, op in pairs if stage == "restart"] == [0, 7.5]


def test_a_worker_rank_service_gets_no_health_wait():
    """role = "worker" (a non-zero rank: no health endpoint): its restart (start + status)
    is its liveness; the leader's service still waits for health, staggered or not."""
    lead = ServiceSpec(kind="systemd", unit="sglang.service")
    rank1 = ServiceSpec(kind="command", name="rank1", start="a", stop="b", status="c",
                        role="worker")  # fmt: skip
    for stagger_s in (None, 2.0):
        host = Host(name="h", address="a", services=(lead, rank1), stagger_s=stagger_s)
        pairs = ops.service_ops(host)
        healths = [op.typed_args().service.name for stage, op in pairs if stage == "health"]
        assert healths == ["sglang.service"]
        assert len([p for p in pairs if p[0] == "restart"]) == 2
    starts = ops.service_action_ops(Host(name="h", address="a", services=(rank1,)), "start", True)
    assert [stage for stage, _ in starts] == ["restart"]  # a group's start: no health either
