"""`HostDetails` (results.py) names every key a command writes into a host's details, also
the keys written from JSON that mypy cannot see into: the facts `hosts check` records
whole (pipeline/hosts_check.py casts them) and the data of a push's preflight refusal
(pipeline/push.py)."""

from __future__ import annotations

from ddtree_deploy.agent.host.wire_outcomes import LockRefusal
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.results import HostDetails, HostResult, Outcome

KEYS = frozenset(HostDetails.__annotations__)


def test_every_key_hosts_check_records_is_a_details_key() -> None:
    assert set(Facts.FIELDS) | {"route", "become"} <= KEYS


def test_every_key_of_a_preflight_refusal_is_a_details_key() -> None:
    # check_plan refuses with {lock} (locked) or {files: state by path} (drift)
    assert set(LockRefusal.FIELDS) | {"files"} <= KEYS


def test_details_are_a_plain_dict() -> None:
    """A TypedDict is a dict at run time: results compare and print as before."""
    result = HostResult("h1", Outcome.OK, details={"wave": "canary", "duration_s": 1.5})
    assert type(result.details) is dict
    assert result.details == {"wave": "canary", "duration_s": 1.5}
    assert HostResult("h2", Outcome.OK).details == {}
