"""The documented exit codes, and how host outcomes map onto them."""

from __future__ import annotations

from ddtree_deploy.results import HostResult, Outcome

OK = 0
ROLLED_BACK = 1  # failed and rolled back cleanly
BAD_INPUT = 2  # bad input or config, nothing changed
NEEDS_ATTENTION = 3  # failed and a host needs attention
LOCKED = 4  # host locked by another run

_CODE = {
    Outcome.OK: OK,
    Outcome.NO_CHANGES: OK,
    Outcome.NOT_STARTED: OK,
    Outcome.ROLLED_BACK: ROLLED_BACK,
    Outcome.FAILED: ROLLED_BACK,
    Outcome.REFUSED: BAD_INPUT,
    Outcome.LOCKED: LOCKED,
    Outcome.NEEDS_ATTENTION: NEEDS_ATTENTION,
}
# When hosts end differently, the most urgent code wins.
_URGENCY = [NEEDS_ATTENTION, LOCKED, BAD_INPUT, ROLLED_BACK, OK]


def exit_code(results: list[HostResult]) -> int:
    codes = {_CODE[r.outcome] for r in results}
    return next((c for c in _URGENCY if c in codes), OK)
