"""pipeline/capture.py: one edits request to a temp host run by the REAL agent bundle
(tests/agent's fake site-packages, hand-edited) becomes the Capture `patchset new` writes;
every refusal is one PatchsetError naming the host."""

from __future__ import annotations

import base64

import pytest

from ddtree_deploy.agent import AgentResponse, OpResult
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_capture import EditedFile, EditsResult
from ddtree_deploy.errors import AgentError, PatchsetError
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.patchset.models import Target
from ddtree_deploy.pipeline.capture import capture_from_edits, capture_host
from ddtree_deploy.transport import FakeTransport
from tests.agent.conftest import MODULE, PACKAGE, VERSION, fake_host, sha  # noqa: F401
from tests.agent.test_edits_op import ADDED, EDITED, GONE, hand_edit
from tests.agent.test_locate import editable  # noqa: F401 - the editable-install fixture

TARGET = Target(package=PACKAGE, version=VERSION)


def test_one_read_only_request_becomes_the_capture(fake_host):  # noqa: F811
    hand_edit(fake_host.site)
    capture = capture_host(fake_host.transport, TARGET)
    assert capture.changed == {MODULE: EDITED.encode()}
    assert capture.added == {ADDED: "ADDED = 'é'\n".encode()}
    assert capture.deleted == [GONE]
    assert capture.ignored == [
        "fakepkg/__pycache__/",
        "fakepkg/stray.pyc",
        "fakepkg/sub/__pycache__/",
    ]
    assert capture.source == f"host x ({fake_host.site})"
    assert fake_host.transport.stats.execs == 1
    assert not fake_host.state.exists()  # no lock, no journal, no state dir


def test_another_installed_version_is_refused_naming_host_and_both_versions(fake_host):  # noqa: F811
    other = Target(package=PACKAGE, version="2.0")
    with pytest.raises(PatchsetError) as caught:
        capture_host(fake_host.transport, other)
    assert str(caught.value) == (
        f"x: installed {PACKAGE} is {VERSION}, --target is {PACKAGE}==2.0: capture from a host "
        f"running 2.0 (or give --target {PACKAGE}=={VERSION})"
    )


def test_files_whose_bytes_did_not_come_back_are_refused_by_name():
    entries = [
        EditedFile("fakepkg/blob.bin", "extra", "s" * 64, None, 3, error="a binary file"),
        EditedFile("fakepkg/big.py", "changed", "t" * 64, "r" * 64, 9, error="too large"),
    ]
    found = EditsResult(package_version=VERSION, package_root="/site", recorded=1, files=entries)
    with pytest.raises(PatchsetError) as caught:
        capture_from_edits("h", TARGET, found)
    assert str(caught.value) == (
        "h: cannot capture fakepkg/blob.bin (a binary file); fakepkg/big.py (too large)"
    )


def test_an_editable_install_says_to_capture_from_its_tree(editable):  # noqa: F811
    host, _site, source = editable
    with pytest.raises(PatchsetError) as caught:
        capture_host(host.transport, TARGET)
    assert str(caught.value) == f"x: editable install: capture with --from-tree {source}"


def found_one(data: bytes, sent_sha: str) -> EditsResult:
    """An answer carrying one changed file: `data` as sent, `sent_sha` as the host hashed it."""
    entry = EditedFile(MODULE, "changed", sent_sha, "r" * 64, len(data),
                       content_b64=base64.b64encode(data).decode())  # fmt: skip
    return EditsResult(package_version=VERSION, package_root="/site", recorded=1, files=[entry])


def test_bytes_must_hash_as_the_host_said():
    assert capture_from_edits("h", TARGET, found_one(b"x\n", sha(b"x\n"))).changed == {
        MODULE: b"x\n"
    }
    with pytest.raises(PatchsetError, match=f"h: {MODULE}: the bytes sent back do not hash"):
        capture_from_edits("h", TARGET, found_one(b"x\n", sha(b"y\n")))


def test_an_answer_about_another_version_is_refused():
    found = found_one(b"x\n", sha(b"x\n")).replace(package_version="0.9")
    with pytest.raises(PatchsetError, match=f"h: installed {PACKAGE} is 0.9"):
        capture_from_edits("h", TARGET, found)


def answering(result: OpResult | None, error: str | None = None) -> FakeTransport:
    """A host whose agent answers every request with `result` (None: no op ran, `error`)."""
    host = Host(name="h", address="a")
    results = [result] if result is not None else []
    return FakeTransport(host, lambda _: AgentResponse(ok=False, results=results, error=error))


def test_a_broken_op_or_a_refused_request_is_no_bad_input():
    broke = OpResult(op="edits", ok=False, error="OSError: EIO", code=Code.EXCEPTION.value)
    with pytest.raises(AgentError, match="h: the edits op failed: OSError: EIO"):
        capture_host(answering(broke), TARGET)
    with pytest.raises(AgentError, match="h: agent version mismatch"):
        capture_host(answering(None, "agent version mismatch"), TARGET)
    refused = OpResult(op="edits", ok=False, error="sglang is not installed",
                       code=Code.PACKAGE_NOT_FOUND.value)  # fmt: skip
    with pytest.raises(PatchsetError, match="^h: sglang is not installed$"):
        capture_host(answering(refused), TARGET)
