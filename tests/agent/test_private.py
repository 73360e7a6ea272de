"""The state dir held to the code cache's standard (agent/host/private.py): the dir, the
dirs above it and every file read from it, checked on open descriptors; and a request to
the REAL bundle refused before it writes anything. Host-level proofs (push, recover,
rollback, status on sshd hosts) are in tests/faults/test_state_dir_security.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import private
from ddtree_deploy.agent.host.ops_smoke import quote_tail
from ddtree_deploy.agent.host.wire import OpFailed
from tests.agent.bare import run_agent

OTHER_UID = 4321  # no such user needed: chown takes numbers
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")


def refusal(path: Path) -> str:
    with pytest.raises(OpFailed) as refused:
        private.check_state_dir(str(path))
    assert refused.value.code == "unsafe_path"
    return str(refused.value)


def test_a_private_dir_passes_and_a_missing_one_may_be_made(tmp_path):
    state = tmp_path / "state"
    assert private.check_state_dir(str(state)) is False  # missing: its parents are safe
    state.mkdir(mode=0o700)
    assert private.check_state_dir(str(state)) is True
    state.chmod(0o755)  # readable by others is fine: only writing is refused
    assert private.check_state_dir(str(state)) is True


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        (0o770, "writable by its group (mode 0770)"),
        (0o703, "writable by others (mode 0703)"),
        (0o777, "writable by group and others (mode 0777)"),
    ],
)
def test_a_state_dir_others_may_write_is_refused(tmp_path, mode, says):
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    assert f"refusing state dir {state}: {says}" in refusal(state)


@needs_root
def test_another_users_state_dir_or_parent_is_refused_naming_the_owner(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, OTHER_UID, OTHER_UID)
    assert f"refusing state dir {state}: owned by uid {OTHER_UID}" in refusal(state)
    parent = tmp_path / "theirs"
    (parent / "state").mkdir(parents=True, mode=0o700)
    os.chown(parent, OTHER_UID, OTHER_UID)
    said = refusal(parent / "state")
    assert f"{parent} is owned by uid {OTHER_UID}" in said
    assert refusal(parent / "not-yet")  # a missing state dir in their dir: refused too


def test_a_link_on_the_way_or_a_world_writable_parent_is_refused(tmp_path):
    real = tmp_path / "real"
    (real / "state").mkdir(parents=True, mode=0o700)
    (tmp_path / "link").symlink_to(real)
    assert f"{tmp_path / 'link'} is a symbolic link" in refusal(tmp_path / "link" / "state")
    (tmp_path / "state-link").symlink_to(real / "state")
    assert "is a symbolic link" in refusal(tmp_path / "state-link")
    shared = tmp_path / "shared"
    (shared / "state").mkdir(parents=True, mode=0o700)
    shared.chmod(0o777)
    assert "writable by others and not sticky (mode 0777)" in refusal(shared / "state")
    shared.chmod(0o1777)  # like /tmp: others cannot rename our entries
    assert private.check_state_dir(str(shared / "state")) is True


@needs_root
def test_files_are_read_only_when_ours_alone(tmp_path):
    mine = tmp_path / "journal.jsonl"
    mine.write_text("{}\n")
    mine.chmod(0o600)
    with private.open_private(str(mine), "r") as fh:
        assert fh.read() == "{}\n"
    for change, says in (
        (lambda: os.chown(mine, OTHER_UID, OTHER_UID), f"owned by uid {OTHER_UID}"),
        (lambda: mine.chmod(0o666), "writable by group and others"),
    ):
        os.chown(mine, 0, 0)
        mine.chmod(0o600)
        change()
        with pytest.raises(OpFailed, match=says):
            private.open_private(str(mine))
    link = tmp_path / "lock"
    link.symlink_to("/etc/hostname")
    with pytest.raises(OpFailed, match="a symbolic link"):
        private.open_private(str(link))
    with pytest.raises(FileNotFoundError):
        private.open_private(str(tmp_path / "missing"))


@needs_root
def test_the_bundle_refuses_a_request_before_it_writes_anything(tmp_path):
    """The first op fails with unsafe_path naming the dir and owner; no lock, no journal."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, OTHER_UID, OTHER_UID)
    lock = ("lock_acquire", {"run_id": "r1", "holder": "t"})
    answer = run_agent(state, ("facts", {}), lock)
    assert not answer["ok"] and len(answer["results"]) == 1, answer
    first = answer["results"][0]
    assert first["op"] == "facts" and first["code"] == "unsafe_path"
    assert f"owned by uid {OTHER_UID}" in first["error"] and str(state) in first["error"]
    assert os.listdir(state) == []
    # read-only service ops do not touch the state dir and still run
    assert run_agent(state, ("services", {"services": []}))["ok"]


def test_a_suites_stdout_is_quoted_cleaned_and_bounded():
    assert quote_tail("", 10) == "(empty)"
    assert quote_tail("BANNER\x1b[31mred\x07\u2028!", 100) == "BANNER\\x1b[31mred\\x07\\u2028!"
    assert quote_tail("x" * 50 + "tail", 6) == "xxtail"
    assert quote_tail("a\tb\nc", 10) == "a\tb\nc"
