"""docs/troubleshooting.md quotes the messages the code really writes: each phrase below is in
the page and in the package's source, so a reworded message fails here until the page
follows it."""

from __future__ import annotations

import pytest

from tests.support import REPO

PAGE = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
SOURCE = "\n".join(
    p.read_text(encoding="utf-8") for p in sorted((REPO / "ddtree_deploy").rglob("*.py"))
)

# (phrase as the page writes it, phrase as the source writes it)
PHRASES = [
    ("inventory file not found", "inventory file not found"),
    ("TOML syntax error", "TOML syntax error"),
    ("missing required key 'address'", "missing required key"),
    ("unknown key 'adress'; did you mean 'address'?", "did you mean"),
    ("systemd unit NAME not found on the host", "not found on the host (LoadState=not-found)"),
    ("--limit '…' matches no host", "matches no host"),
    ("no target: give --host, --group or --all", "no target: give --host, --group or --all"),
    ("of restart group 'G' selected without", "selected without"),
    ("a restart group needs 'members' and 'leader'", "a restart group needs 'members' and"),
    ("aborted: nothing changed", "aborted: nothing changed"),
    ("tampered store", "tampered store"),
    ("lossless reference not found", "lossless reference not found"),
    (
        "declares server flags ([serve]) but the inventory gives no 'service.args_file'",
        "declares server flags ([serve]) but the",
    ),
    ("unknown host key", "unknown host key"),
    ("host key CHANGED", "host key CHANGED"),
    ("is @revoked in", "is @revoked in"),
    ("cannot be run on host", "cannot be run on host"),
    ("become: password required", "password required"),
    ("patchset targets", "patchset targets"),
    ("no version of NAME targets it", "targets it"),
    ("base files differ from the lock", "base files differ from the lock"),
    ("cannot keep its owner", "cannot keep its owner"),
    ("must be that user's alone", "be that user's alone"),
    ("(another copy shadows it)", "(another copy shadows it)"),
    ("no committed deploy to roll back", "no committed deploy to roll back"),
    ("no backup named", "no backup named"),
    ("no committed deploy: no recorded baseline", "no committed deploy: no recorded baseline"),
    ("baseline unusable", "baseline unusable"),
    ("unreachable: HOST", "unreachable: "),
    ("authentication failed as", "authentication failed as"),
    ("connection lost during STAGE", "connection lost during "),
    ("no answer from HOP for N s", "no answer from "),
    ("left by a dead run", "left by a dead run"),
    (
        "files restored, but the service is not healthy",
        "files restored, but the service is not healthy",
    ),
    (
        "files restored, but the host lock could not be released",
        "files restored, but the host lock could not be released",
    ),
    ("the old server is not back at its baseline", "the old server is not back at its baseline"),
    ("deployed, but", "deployed, but "),
    (
        "files restored, but the group did not restart",
        "files restored, but the group did not restart",
    ),
    ("container recreated: patch gone", "container recreated: patch gone"),
    ("unreadable answer from the host", "unreadable answer from the host"),
    ("internal error", "internal error: "),
]


@pytest.mark.parametrize(("in_page", "in_source"), PHRASES, ids=[p for p, _ in PHRASES])
def test_the_page_quotes_a_message_the_code_writes(in_page, in_source):
    assert in_page in PAGE
    assert in_source in SOURCE, "no longer in ddtree_deploy/: update docs/troubleshooting.md"


def test_a_phrase_the_code_never_writes_is_caught():  # the control
    assert "host key rotated quietly" not in SOURCE
