"""`-p NAME` picks per host the highest version targeting the host's sglang (pure: a fake
transport answers facts; patchsets are copies of the real ddtree 1.0.0 and 2.0.0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_deploy.agent import AgentRequest, AgentResponse, OpResult
from ddtree_deploy.agent.host.wire import FactsArgs
from ddtree_deploy.errors import PatchsetError, TransportError
from ddtree_deploy.events import Event, HostRecorder
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun, per_host, pick_patchset
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PatchsetChoice, PreparedPatchset, prepare_choice
from ddtree_deploy.transport import Transport
from tests.pipeline.fakehost import RESULTS
from tests.support import REPO, copy_patchset, make_patchset

DDTREE = REPO / "patchsets" / "ddtree"


def patchsets_with(root: Path, *versions: str) -> Path:
    """Copy the named real ddtree versions (locked) to root/patchsets; return that dir."""
    for version in versions:
        copy_patchset(DDTREE / version, root / "patchsets" / "ddtree" / version)
    return root / "patchsets"


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory) -> Path:
    """ddtree 1.0.0, 1.0.5 (sglang 0.5.13.post1) and 2.0.0 (sglang 0.5.23)."""
    root = tmp_path_factory.mktemp("mixed")
    base = patchsets_with(root, "1.0.0", "2.0.0")
    make_patchset(root, version="1.0.5")
    return base


class FactsTransport(Transport):
    """Answers every request with facts naming `installed` as the package version."""

    def __init__(self, host: Host, installed: str | None, reachable: bool = True):
        super().__init__(host)
        self.installed = installed
        self.reachable = reachable
        self.requests: list[AgentRequest] = []

    def call(self, request: AgentRequest) -> AgentResponse:
        self.requests.append(request)
        if not self.reachable:
            raise TransportError(self.host.name, "connection refused")
        data = {**RESULTS["facts"]["data"], "package_version": self.installed}
        results = [OpResult(op=op.op, ok=True, data=data) for op in request.ops]
        return AgentResponse(ok=True, results=results)

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        raise AssertionError("not used")


def host_run(installed: str | None, reachable: bool = True) -> tuple[HostRun, list[Event]]:
    host = Host(name="h1", address="127.0.0.1")
    events: list[Event] = []
    transport = FactsTransport(host, installed, reachable)
    recorder = HostRecorder(host="h1", run_id="r1", sink=events.append)
    return HostRun(host=host, transport=transport, recorder=recorder, run_id="r1"), events


def test_name_only_keeps_one_candidate_per_target_highest_first(mixed_dir):
    choice = prepare_choice(mixed_dir, "ddtree")
    assert [c.ref for c in choice.candidates] == ["ddtree@1.0.5", "ddtree@2.0.0"]
    assert choice.fixed is None
    assert choice.for_version("0.5.13.post1").ref == "ddtree@1.0.5"
    assert choice.for_version("0.5.23").ref == "ddtree@2.0.0"
    assert choice.for_version("0.5.9") is None and choice.for_version(None) is None
    assert choice.label == (
        "ddtree (per host: ddtree@1.0.5 for sglang 0.5.13.post1, ddtree@2.0.0 for sglang 0.5.23)"
    )


def test_pinned_version_is_fixed_exactly_as_before(mixed_dir):
    for ref in ("ddtree@1.0.0", "ddtree@2.0.0"):
        choice = prepare_choice(mixed_dir, ref)
        assert choice.fixed is not None and choice.fixed.ref == ref
        assert choice.for_version("0.5.9") is choice.fixed  # the agent refuses a mismatch
        assert choice.label == ref


def test_one_target_only_is_fixed_at_the_highest(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    make_patchset(tmp_path, version="1.0.5")
    choice = prepare_choice(base, "ddtree")
    assert choice.fixed is not None and choice.fixed.ref == "ddtree@1.0.5"
    run, events = host_run("0.5.23")
    assert pick_patchset(run, choice) is choice.fixed
    assert run.transport.requests == [] and events == []  # no extra round trip


def test_unknown_name_and_broken_candidate_are_config_errors(tmp_path, mixed_dir):
    with pytest.raises(PatchsetError, match="no patchset named 'nope'"):
        prepare_choice(mixed_dir, "nope")
    base = patchsets_with(tmp_path, "1.0.0", "2.0.0")
    utils = base / "ddtree" / "2.0.0" / "files" / "sglang" / "srt" / "speculative"
    utils.mkdir(parents=True, exist_ok=True)  # a local copy of a shared file wins
    (utils / "ddtree_utils.py").write_text("# changed\n")
    with pytest.raises(PatchsetError, match="changed since the lock was written"):
        prepare_choice(base, "ddtree")


@pytest.mark.parametrize(
    ("installed", "ref"),
    [("0.5.13.post1", "ddtree@1.0.5"), ("0.5.23", "ddtree@2.0.0")],
)
def test_pick_reads_the_installed_version_once(mixed_dir, installed, ref):
    choice = prepare_choice(mixed_dir, "ddtree")
    run, events = host_run(installed)
    picked = pick_patchset(run, choice)
    assert isinstance(picked, PreparedPatchset) and picked.ref == ref
    (request,) = run.transport.requests
    assert [op.op for op in request.ops] == ["facts"]
    assert request.ops[0].typed_args() == FactsArgs(paths=[], package="sglang", serve_path=None)
    info = [e for e in events if e.event == "info"]
    assert info[0].stage == "connect"
    assert info[0].data == {"patchset": ref, "package_version": installed}


@pytest.mark.parametrize(("strict", "outcome"), [(False, "not_started"), (True, "refused")])
def test_no_matching_version_skips_or_refuses_under_strict(mixed_dir, strict, outcome):
    choice = prepare_choice(mixed_dir, "ddtree", strict=strict)
    run, _ = host_run("0.5.9")
    calls: list[str] = []
    result = per_host(choice, lambda r, p: calls.append(p.ref))(run)
    assert calls == []
    assert result.outcome == Outcome(outcome)
    assert result.message == (
        "sglang 0.5.9: no version of ddtree targets it (have ddtree@1.0.5 for sglang "
        "0.5.13.post1, ddtree@2.0.0 for sglang 0.5.23)"
    )
    assert result.details["package_version"] == "0.5.9"


def test_not_installed_and_unreachable(mixed_dir):
    choice = prepare_choice(mixed_dir, "ddtree")
    run, _ = host_run(None)
    result = pick_patchset(run, choice)
    assert result.outcome == Outcome.NOT_STARTED
    assert result.message.startswith("sglang not installed: no version of ddtree")
    run, _ = host_run("0.5.23", reachable=False)
    result = pick_patchset(run, choice)
    assert result.outcome == Outcome.NEEDS_ATTENTION and "unreachable" in result.message


def test_fallback_reports_read_only_hosts_unless_strict(mixed_dir):
    def fallback(run: HostRun, reason: str) -> HostResult:
        return run.result(Outcome.OK, f"facts only; {reason}")

    loose = prepare_choice(mixed_dir, "ddtree")
    run, _ = host_run("0.5.9")
    result = per_host(loose, lambda r, p: None, fallback=fallback)(run)
    assert result.outcome == Outcome.OK and result.message.startswith("facts only; sglang 0.5.9")
    strict = prepare_choice(mixed_dir, "ddtree", strict=True)
    run, _ = host_run("0.5.9")
    assert per_host(strict, lambda r, p: None, fallback=fallback)(run).outcome == Outcome.REFUSED


def test_suite_names_union_in_order():
    def prepared(ref: str, suites: tuple[str, ...], after: tuple[str, ...]) -> PreparedPatchset:
        name, _, version = ref.partition("@")
        return PreparedPatchset(ref, name, version, "sglang", version, (), suites, after, 1.0)

    a = prepared("x@1.0.0", ("integrity", "compile"), ("server",))
    b = prepared("x@2.0.0", ("integrity", "imports"), ())
    choice = PatchsetChoice("x", (a, b))
    assert choice.suite_names == ["integrity", "compile", "server", "imports"]
