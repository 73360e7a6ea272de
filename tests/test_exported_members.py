"""Public names of each room are deliberate: `__all__` is pinned and names everything public.

Like httpx's test of the same name.
"""

from __future__ import annotations

import importlib
import types

import pytest

EXPORTED = {
    "ddtree_deploy.cli": [
        "Output",
        "RunContext",
        "SharedOptions",
        "Targets",
        "app",
        "leave",
        "main",
    ],
    "ddtree_deploy.fleet": [
        "Count",
        "FleetResult",
        "GroupUnit",
        "HostFn",
        "RolloutPolicy",
        "SUCCESS",
        "UndoFn",
        "Wave",
        "first_started",
        "max_fail_exceeded",
        "parse_batches",
        "parse_count",
        "parse_shard",
        "plan_waves",
        "run_rollout",
        "shard_items",
        "stop_reason",
    ],
    "ddtree_deploy.report": [
        "ConsoleSink",
        "FanoutSink",
        "JsonLinesSink",
        "LiveDisplay",
        "append_summary",
        "backups_table",
        "count_outcomes",
        "facts_table",
        "gate_table",
        "fleet_table",
        "junit_xml",
        "plan_table",
        "progress_sink",
        "smoke_table",
        "status_table",
        "summary_markdown",
        "version_label",
        "write_junit",
    ],
    "ddtree_deploy.gate": [
        "Action",
        "GateCheck",
        "GateConfig",
        "GateMode",
        "GateSettings",
        "GreedyVerdict",
        "METRIC_RULE",
        "MetricRule",
        "Thresholds",
        "Verdict",
        "accept_length",
        "compare",
        "compare_outputs",
        "describe_failures",
        "describe_undecided",
        "evaluate",
        "noise_band",
        "p95",
        "parse_rule",
        "resolve",
        "round_throughputs",
        "sample_sum",
    ],
    "ddtree_deploy.inventory": [
        "Host",
        "Inventory",
        "ServiceSpec",
        "SmokeSpec",
        "default_inventory_path",
        "load_inventory",
        "parse_inventory",
        "select_hosts",
    ],
    "ddtree_deploy.patchset": [
        "Capture",
        "DedupePlan",
        "FileEntry",
        "LockedFile",
        "Patchset",
        "PatchsetLock",
        "PatchsetPlan",
        "PatchsetSpec",
        "STORE_DIR",
        "SharedSource",
        "apply_dedupe",
        "blob_path",
        "build_lock",
        "capture_from_diff",
        "capture_from_tree",
        "check_sources",
        "copy_version",
        "default_patchsets_dir",
        "list_patchsets",
        "load_patchset",
        "parse_patchset",
        "plan_dedupe",
        "plan_patchset",
        "read_source",
        "resolve_patchset",
        "source_file",
        "parse_ref",
        "store_dir",
        "verify_patchset",
        "version_key",
        "write_lock",
        "write_patchset",
    ],
    "ddtree_deploy.transport": [
        "AgentExit",
        "FakeTransport",
        "LocalTransport",
        "SSHTransport",
        "Transport",
        "TransportStats",
        "open_transport",
    ],
    "ddtree_deploy.events": [
        "EVENT_SCHEMA_VERSION",
        "STAGE_ORDER",
        "Event",
        "EventKind",
        "EventSink",
        "HostRecorder",
        "StageRecord",
    ],
    "ddtree_deploy.agent": [
        "AgentRequest",
        "AgentResponse",
        "Op",
        "OpResult",
        "agent_command",
        "agent_shell_line",
        "apply_unified_diff",
        "decode_response",
        "encode_request",
        "packed_agent",
        "sha256_bytes",
    ],
    "ddtree_deploy.pipeline": [
        "GateOptions",
        "HostRun",
        "PUSH_REQUESTS",
        "PushOptions",
        "capture_host",
        "controller_holder",
        "gate_host",
        "hosts_check",
        "new_run_id",
        "per_host",
        "pick_patchset",
        "plan_files",
        "plan_host",
        "prune_host",
        "push_host",
        "recover_host",
        "rollback_host",
        "smoke_host",
        "status_host",
    ],
    "ddtree_deploy.stages": [
        "PatchsetChoice",
        "PreparedFile",
        "PreparedPatchset",
        "default_smoke_dir",
        "load_smoke_sources",
        "prepare_choice",
        "prepare_patchset",
    ],
    "ddtree_deploy.errors": [
        "AgentError",
        "BecomeError",
        "ConfigError",
        "ContainerError",
        "DeployError",
        "HostKeyError",
        "InventoryError",
        "PatchsetError",
        "PythonError",
        "RouteError",
        "TransportError",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_all_is_pinned_and_importable(name):
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(EXPORTED[name])
    for member in module.__all__:
        assert hasattr(module, member), member


def _from_elsewhere(value: object, package: str) -> bool:
    """A module, or a class/function another room defines (imported for a type hint)."""
    if isinstance(value, types.ModuleType):
        return True
    if not isinstance(value, type | types.FunctionType):
        return False  # constants, aliases and objects such as the Typer app are the room's own
    return not value.__module__.startswith(package)


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_a_package_exports_every_public_name_it_holds(name):
    """What a room's __init__ brings in from its own modules is what it means to export."""
    module = importlib.import_module(name)
    if not hasattr(module, "__path__"):
        pytest.skip("a plain module: its imports are not exports")
    public = {
        member
        for member, value in vars(module).items()
        if not member.startswith("_") and not _from_elsewhere(value, name)
    }
    # names the room's module __getattr__ (PEP 562) imports on first use are exports too
    public |= {member for member in module.__all__ if member not in vars(module)}
    assert public == set(module.__all__)
