"""Typed requests/answers of the agent, and the bytes that carry them to a host."""

from __future__ import annotations

import base64
import json
import shlex
import zlib
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ddtree_deploy.agent import remote
from ddtree_deploy.errors import AgentError

# The first stage, run by `python -c`: read one line (the compressed agent), exec it.
_BOOTSTRAP = (
    "import sys,zlib,base64;"
    "exec(compile(zlib.decompress(base64.b64decode(sys.stdin.readline())),'ddtree-agent','exec'))"
)


class Op(BaseModel):
    op: str
    args: dict[str, Any] = Field(default_factory=dict)


class AgentRequest(BaseModel):
    state_dir: str
    ops: list[Op]
    agent_version: int = remote.AGENT_VERSION


class OpResult(BaseModel):
    """One op's answer: ok, halted (ok, later ops skipped, `note` says why) or failed."""

    op: str
    ok: bool
    data: Any = None
    error: str | None = None
    code: str | None = None
    halt: bool = False
    note: str | None = None
    duration_s: float = 0.0


class AgentResponse(BaseModel):
    ok: bool
    results: list[OpResult]
    error: str | None = None
    wall_s: float = 0.0

    def result(self, op: str) -> OpResult | None:
        """The result of the named op, or None if it did not run."""
        return next((r for r in self.results if r.op == op), None)

    @property
    def failed(self) -> OpResult | None:
        """The op that failed (and stopped the request), or None."""
        return next((r for r in self.results if not r.ok), None)

    @property
    def halted(self) -> OpResult | None:
        """The op that halted the request with nothing left to do, or None."""
        return next((r for r in self.results if r.ok and r.halt), None)


@cache
def packed_agent() -> bytes:
    """The first stdin line of an agent process: the compressed agent source."""
    source = Path(remote.__file__).read_bytes()
    return base64.b64encode(zlib.compress(source, 9)) + b"\n"


def agent_command(python: str) -> list[str]:
    """argv that starts the agent with the host's interpreter."""
    return [python, "-c", _BOOTSTRAP]


def agent_shell_line(python: str) -> str:
    """The same argv as one safely quoted shell line (what SSH exec needs)."""
    return shlex.join(agent_command(python))


def encode_request(request: AgentRequest) -> bytes:
    """One request as one stdin line (JSON escapes every newline inside it)."""
    return request.model_dump_json().encode() + b"\n"


def decode_response(host: str, stdout: str, stderr: str, exit_code: int) -> AgentResponse:
    """Pick the framed answer out of stdout; raise AgentError when there is none."""
    start, end = stdout.rfind(remote.BEGIN), stdout.rfind(remote.END)
    if start < 0 or end < start:
        tail = (stderr or stdout).strip()[-800:]
        raise AgentError(host, f"agent gave no answer (exit {exit_code}): {tail or 'no output'}")
    try:
        return AgentResponse.model_validate(json.loads(stdout[start + len(remote.BEGIN) : end]))
    except ValueError as exc:
        raise AgentError(host, f"unreadable agent answer: {exc}") from None
