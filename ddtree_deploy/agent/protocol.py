"""Typed requests/answers of the agent, and the bytes that carry them to a host."""

from __future__ import annotations

import json
import shlex
import threading
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from ddtree_deploy.agent.host import wire, wire_bundle
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.errors import AgentError

HOST_DIR = Path(wire.__file__).parent  # the stdlib-only modules the bundle is made of
R = TypeVar("R", bound=wire.Record)

# The first stage, run by `python -c`: read one stdin line (the zlib'd JSON bundle,
# {"ddtree_agent.<module>": source}) and serve those modules to `import` from memory, under
# file names like ddtree_agent/ops_files.py, with their source for tracebacks. A module runs
# the loader's code object for it (L.C, filled by codecache from the user's cache) or else
# is compiled from its source. The leading comment names the process for `ps` (the sandbox
# tests find agents by it).
BOOTSTRAP_IMPORTER = """# ddtree-agent
import sys,json,zlib,base64,importlib.util as u
S=json.loads(zlib.decompress(base64.b64decode(sys.stdin.readline())))
class L:
 C={}
 def find_spec(s,n,p=None,t=None):
  if n=='ddtree_agent' or n in S:return u.spec_from_loader(n,s,is_package=n not in S)
 def create_module(s,spec):return None
 def exec_module(s,m):
  n=m.__name__;m.__file__=n.replace('.','/')+('.py' if n in S else '/__init__.py')
  if n in S:exec(s.C.get(n) or compile(S[n],m.__file__,'exec'),m.__dict__)
  else:m.SOURCES=S;m.LOADER=s
 def get_source(s,n):return S.get(n,'')
sys.meta_path.insert(0,L())
"""
_BOOTSTRAP = (
    BOOTSTRAP_IMPORTER
    + "import ddtree_agent.codecache as c;c.use_cache();import ddtree_agent.main as m;m.main()\n"
)


@cache
def bundle() -> dict[str, str]:
    """Return the agent bundle: {"ddtree_agent.<module>": source} of agent/host/*.py."""
    return wire_bundle.bundle_sources(HOST_DIR)


@cache
def agent_version() -> str:
    """Return the agent version a request carries: the sha256 hex of the bundle."""
    return wire_bundle.bundle_hash(bundle())


class Op(BaseModel):
    """One op of a request: its name and its arguments (a wire.*Args record as a dict)."""

    op: wire.OpName
    args: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, args: wire.Record) -> Op:
        """The op whose arguments are `args` (a wire.*Args record), e.g. FactsArgs -> facts.

        Raises KeyError for a record that is no op's arguments.
        """
        return cls(op=wire.OP_NAME[type(args)], args=args.to_dict())

    def typed_args(self) -> wire.Record:
        """The arguments read as this op's wire.*Args record; raises wire.WireError naming
        the op and the key (unknown op, unknown or missing key)."""
        return wire.parse_args(self.op, self.args)


class AgentRequest(BaseModel):
    """One round trip: ops run in order on the host, state under `state_dir`.

    agent_version is the controller's bundle hash; an agent built from another bundle
    refuses the request ("agent version mismatch"). container: on a container host, the
    wire_container.ContainerSpec (as a dict) the host's agent relays the request into
    (the transport sets it, transport/launch.py).
    """

    state_dir: str
    ops: list[Op]
    agent_version: str = Field(default_factory=agent_version)
    container: dict[str, Any] | None = None


class OpResult(BaseModel):
    """One op's answer: ok, halted (ok, later ops skipped, `note` says why) or failed."""

    op: wire.OpName
    ok: bool
    data: Any = None
    error: str | None = None
    code: str | None = None
    halt: bool = False
    note: str | None = None
    duration_s: float = 0.0

    def data_as(self, record: type[R]) -> R:
        """Return `data` read as the typed record (e.g. wire_results.Facts); raises
        wire.WireError naming the op and the key when it does not fit."""
        return record.from_dict(self.data, f"{self.op} result")

    def data_or_none(self, record: type[R]) -> R | None:
        """`data` read as the typed record, or None when it is other data: what a reporter
        reads where the op may also answer something else (a failure's traceback, a refusal
        of its arguments) and there is then nothing to say."""
        try:
            return self.data_as(record)
        except wire.WireError:
            return None


class AgentResponse(BaseModel):
    """The answer to one request: one OpResult per op run; `error` when none could run,
    and `code` when a container host's relay says why (wire_container.NOT_STARTED,
    AGENT_LOST: the transport turns those into errors)."""

    ok: bool
    results: list[OpResult]
    error: str | None = None
    code: str | None = None
    wall_s: float = 0.0

    def result(self, op: wire.OpName) -> OpResult | None:
        """The result of the named op, or None if it did not run."""
        return next((r for r in self.results if r.op == op), None)

    def result_as(self, op: wire.OpName, record: type[R]) -> R | None:
        """The named op's data read as `record` (also when it halted), or None if the op did
        not run or failed.

        Raises wire.WireError when the data does not fit the record.
        """
        result = self.result(op)
        if result is None or not result.ok:
            return None
        return result.data_as(record)

    def facts(self) -> Facts | None:
        """The facts op's answer, typed; None if it did not run or failed."""
        return self.result_as(wire.OpName.FACTS, Facts)

    @property
    def failed(self) -> OpResult | None:
        """The op that failed (and stopped the request), or None."""
        return next((r for r in self.results if not r.ok), None)

    @property
    def halted(self) -> OpResult | None:
        """The op that halted the request with nothing left to do, or None."""
        return next((r for r in self.results if r.ok and r.halt), None)


def packed_agent() -> bytes:
    """The first stdin line of an agent process: the bundle as base64(zlib(JSON)).

    Made once per process, under a lock: every host thread of a fleet asks for it at its
    first session, and `functools.cache` alone would let each of them pack it (~10 ms of
    CPU each, the GIL-held JSON part serialised) before the first result is stored.
    """
    with _PACK_LOCK:
        return _packed_agent()


_PACK_LOCK = threading.Lock()


@cache
def _packed_agent() -> bytes:
    return wire_bundle.pack_bundle(bundle())


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
    start, end = stdout.rfind(wire.BEGIN), stdout.rfind(wire.END)
    if start < 0 or end < start:
        tail = (stderr or stdout).strip()[-800:]
        raise AgentError(host, f"agent gave no answer (exit {exit_code}): {tail or 'no output'}")
    try:
        return AgentResponse.model_validate(json.loads(stdout[start + len(wire.BEGIN) : end]))
    except ValueError as exc:
        raise AgentError(host, f"unreadable agent answer: {exc}") from None
