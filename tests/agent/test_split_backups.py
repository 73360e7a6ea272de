"""Which backups a prune removes (agent/host/pure.py's split_backups): the one rule the
prune op and `backups prune --dry-run` share."""

from __future__ import annotations

import pytest

from ddtree_deploy.agent.host.pure import split_backups

IDS = ["d1", "d2", "d3", "d4"]  # oldest first


@pytest.mark.parametrize(
    ("installing", "keep", "removed"),
    [
        (set(), 2, ["d1", "d2"]),
        (set(), 4, []),
        (set(), 9, []),
        ({"d1"}, 2, ["d2"]),  # an installing deploy's backup is neither removed nor counted
        ({"d4"}, 1, ["d1", "d2"]),
        ({"d1", "d2", "d3", "d4"}, 1, []),
    ],
)
def test_split_backups(installing, keep, removed):
    got_removed, kept = split_backups(IDS, installing, keep)
    assert got_removed == removed
    assert kept == [d for d in IDS if d not in removed]
