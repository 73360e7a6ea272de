"""Read a host's facts in one round trip: the first request of every read-only command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddtree_deploy.agent import AgentResponse, Op, OpResult
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.serve_file import ServeFact, describe_serve_fact


@dataclass(frozen=True)
class HostFacts:
    """A host's facts as the controller keeps them.

    facts: the facts op's answer, its `serve` left out (None): the raw serve file may hold
    an api key. serve: that serve file described instead (redacted), or None when the host
    has none to read.
    """

    facts: Facts
    serve: ServeFact | None
    also: tuple[OpResult, ...] = ()  # the answers to read_facts' `also` ops, in order

    def to_dict(self) -> dict[str, Any]:
        """Return the facts as JSON, as the agent sent them but `serve` described."""
        return self.facts.to_dict() | {"serve": self.serve.to_dict() if self.serve else None}


def read_facts(
    run: HostRun, prepared: PreparedPatchset | None, stage: Stage, also: Sequence[Op] = ()
) -> HostFacts | HostResult:
    """Return the host's facts (the files of `prepared`, if given), reported under `stage`,
    or the result the host ends with: unreachable, or NEEDS_ATTENTION when facts failed.
    `also`: read-only ops sent in the same round trip, their answers in HostFacts.also.

    The serve file's raw text never leaves this function (it may hold an api key): it
    comes back as a ServeFact with redacted `flags` and `args` instead. An answer that is
    no Facts record ends the host NEEDS_ATTENTION (HostRun.ask).
    """
    steps = [(stage, op) for op in (ops.facts_op(run.host, prepared), *also)]
    response = run.ask(steps)
    if isinstance(response, HostResult):
        return response
    facts = _facts_of(run, response)
    if isinstance(facts, HostResult):
        return facts
    serve = describe_serve_fact(facts.serve) if facts.serve else None
    return HostFacts(
        facts=facts.replace(serve=None),
        serve=serve,
        also=tuple(response.results[1:]),
    )


def ask_facts(run: HostRun, stage: Stage, op: Op) -> Facts | HostResult:
    """Send the one facts `op` under `stage`; return its Facts, or the result the host ends
    with: unreachable, or NEEDS_ATTENTION naming the error when facts failed."""
    response = run.ask([(stage, op)])
    if isinstance(response, HostResult):
        return response
    return _facts_of(run, response)


def _facts_of(run: HostRun, response: AgentResponse) -> Facts | HostResult:
    """The Facts of an answer; REFUSED when the agent refused the state dir or a path
    (unsafe_path: a config matter, nothing was changed), else NEEDS_ATTENTION naming the
    error when facts failed."""
    facts = response.facts()
    if facts is None:
        error = response.failed.error if response.failed else response.error
        if response.failed is not None and response.failed.code == Code.UNSAFE_PATH:
            return run.result(Outcome.REFUSED, error or "unsafe path")
        return run.result(Outcome.NEEDS_ATTENTION, f"facts failed: {error}")
    return facts


def unusable_install(facts: Facts) -> str | None:
    """Why nothing can be planned, pushed or smoke-tested on this host although the package
    is installed: its files are not where Python imports them from, the inventory's API
    key cannot be read there (the message names the file or variable, never the key), or
    the host's systemd does not know a unit of the inventory.
    None when neither holds."""
    return facts.locate_error or facts.api_key_error or facts.service_error


def describe_install(facts: Facts) -> str:
    """Where the package's files are, for a message: "" for a wheel in site-packages,
    " (editable install at ROOT)" for an editable one."""
    if facts.install_kind == "editable" and facts.package_root:
        return f" (editable install at {facts.package_root})"
    return ""
