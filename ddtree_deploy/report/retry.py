"""A push's `--json` output read back: which hosts `push --retry FILE` runs again (pure).

The file is what `push --json` wrote on stdout: one event per line (events.py), every host's
last line its `summary`, whose data names the outcome and the command that wrote it
(report/sinks.py). A file holding several runs (appended) is read for its last run. A host
is retried unless it ended `ok` or `no_changes`: it failed (rolled back, refused, locked),
never started (the fleet stopped first), or needs attention.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from ddtree_deploy.events import EVENT_SCHEMA_VERSION, Event, Stage
from ddtree_deploy.results import Outcome

# Outcomes whose host a retry leaves alone: it is where the push wanted it.
DONE_OUTCOMES = frozenset({Outcome.OK, Outcome.NO_CHANGES})


@dataclass(frozen=True)
class RetryPlan:
    """The last run of a push's JSON Lines: its id, every host's outcome (in the order
    the hosts ended), the hosts to run again, and how many runs the file holds."""

    run_id: str
    outcomes: dict[str, Outcome]
    runs_in_file: int = 1

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts to run again: every one that did not end ok or no_changes."""
        return tuple(h for h, o in self.outcomes.items() if o not in DONE_OUTCOMES)


def read_retry_plan(lines: Iterable[str], command: str = "push") -> RetryPlan:
    """Return the retry plan of the last run in `lines` (a `--json` output of `command`).

    Raises ValueError naming the problem (and the line): a line that is not a JSON event
    of this schema, no host summary at all (nothing ran: empty, or a refused command), or
    a last run written by another command (or by a ddtree-deploy that did not name it).
    """
    summaries: list[tuple[int, Event]] = []
    refusal: Event | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        event = _event(number, line)
        if event.stage == Stage.SUMMARY and event.event == "info":
            summaries.append((number, event))
        elif event.stage == Stage.INPUT and event.event == "fail":
            refusal = event
    if not summaries:
        raise ValueError(_no_summary(refusal, command))
    runs = list(dict.fromkeys(event.run_id for _, event in summaries))
    last = runs[-1]
    outcomes: dict[str, Outcome] = {}
    for number, event in summaries:
        if event.run_id != last:
            continue
        data = event.data or {}
        wrote = data.get("command")
        if wrote is None:
            raise ValueError(
                f"line {number}: the summary names no command (written by an older "
                f"ddtree-deploy?): cannot tell it is the output of `{command}`"
            )
        if wrote != command:
            raise ValueError(
                f"written by `{wrote}` (run {last}), not `{command}`: give the --json "
                f"output of a `{command}`"
            )
        try:
            outcome = Outcome(str(data.get("outcome")))
        except ValueError:
            raise ValueError(
                f"line {number}: unknown outcome {data.get('outcome')!r} for host {event.host!r}"
            ) from None
        outcomes.pop(event.host, None)  # a host's last summary is its word
        outcomes[event.host] = outcome
    return RetryPlan(last, outcomes, len(runs))


def _event(number: int, line: str) -> Event:
    """Line `number` as an event; raises ValueError saying why it is not one."""
    try:
        raw = json.loads(line)
    except ValueError:
        raise ValueError(
            f"line {number}: not JSON: expected the JSON Lines `--json` writes on stdout"
        ) from None
    if not isinstance(raw, dict):
        raise ValueError(f"line {number}: not a JSON object: expected one event per line")
    version = raw.get("schema_version")
    if version != EVENT_SCHEMA_VERSION:
        raise ValueError(
            f"line {number}: event schema_version {version!r}; this ddtree-deploy reads "
            f"{EVENT_SCHEMA_VERSION}"
        )
    try:
        return Event.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "event"
        why = f"{where}: {first['msg']}"
        raise ValueError(f"line {number}: not a ddtree-deploy event: {why}") from None


def _no_summary(refusal: Event | None, command: str) -> str:
    """Why a file without any host summary has nothing to retry (it is bad input)."""
    if refusal is not None:
        wrote = (refusal.data or {}).get("command") or "a command"
        return (
            f"it records `{wrote}` refused before any host ({refusal.message}): no host "
            "ran, so none is known to retry; fix the input and run it again"
        )
    return f"no host summary in it: not the --json output of a `{command}` that ran"
