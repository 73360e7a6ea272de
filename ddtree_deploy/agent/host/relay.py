"""The host side of a container host: host-side ops here, every other op in the container.

Why a relay. The server runs in a container and the agent must run beside it (its python, its
site-packages, its state dir, its network for health). But `RUNTIME restart NAME` can only run on
the host, and it kills every process in the container, the agent there included. So the SSH (or
local) transport starts this agent with the HOST's python, and each request names its container
(wire_container.ContainerSpec). This process runs the host-side ops itself (the restart of a
`container` service) and hands every run of other ops to one agent in the container
(`RUNTIME exec -i NAME PYTHON -c ...`, fed the same bundle), kept between requests and started
again after a restart. The controller still sends one request and reads one answer per round trip:
the hops here are local pipes. The alternatives were worse: a second SSH session would make a
restart request two round trips; a `docker` call from inside the container needs the runtime's
socket there.

The container's agent starts only once `RUNTIME inspect` finds the container running (a
restart policy's restart waited out): a missing runtime, an unknown or stopped container, an
agent that cannot start there (126/127) are a clear refusal (NOT_STARTED). Each facts answer
gains the container as inspected (id, image): status tells a recreated container apart.
"""

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from .entries import run_entry
from .inspect_runtime import inspect_output
from .ops_service import run_argv
from .wire import BEGIN, END, Code, OpFailed, OpName, parse_args
from .wire_bundle import bundle_sources, pack_bundle
from .wire_container import (
    AGENT_LOST,
    NOT_STARTED,
    RESTARTING_WAIT_S,
    ContainerSpec,
    died_while_starting,
    read_inspect,
    runs_on_host,
)
from .wire_outcomes import RestartResult, ServiceFailure

LOGS_TIMEOUT_S, CHILD_EXIT_WAIT_S = 30, 10
STDERR_TAIL_CHARS = 1500
CANNOT_START = (126, 127)  # the runtime's (and a shell's) "cannot execute" / "not found"


class Refused(Exception):
    """The request cannot run here: `code` (wire_container) and the reason for people."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Relay:
    """One container's agent behind this host-side agent, for every request of a command."""

    def __init__(self):
        self.child: Any = None  # the container's agent (a Popen), None until needed
        self.child_err = None  # a temp file holding its stderr
        self.answered = False  # whether the current child answered a request yet
        self.inspected = None  # ContainerFacts of the last inspect
        self.restarted = None  # (ContainerFacts, monotonic time) right after our restart

    def handle(self, request):
        """Return the answer to a request naming a container (see the module docstring).
        Each run of container ops goes to the container's agent as one sub-request; the
        answer lists every op's entry in request order and stops where an op failed."""
        spec = ContainerSpec.from_dict(request["container"], "request container")
        ops, results, at = request["ops"], [], 0
        try:
            while at < len(ops):
                if runs_on_host(ops[at]):
                    op = ops[at]
                    call = functools.partial(self.run_host_op, spec, op)
                    chunk = [run_entry(op.get("op"), call)[0]]
                    at += 1
                else:
                    end = at
                    while end < len(ops) and not runs_on_host(ops[end]):
                        end += 1
                    try:
                        answer = self.relay(spec, request, ops[at:end])
                    except Refused as exc:
                        died = self.died_starting(spec, ops[at], exc)
                        if died is None:
                            raise
                        results.append(died)
                        break
                    if not answer.get("results") and answer.get("error"):
                        answer["results"] = results
                        answer["ok"] = False
                        return answer  # the container's agent refused the whole request
                    chunk = [self.add_container(spec, e) for e in answer["results"]]
                    at = end
                results.extend(chunk)
                if any(not e["ok"] or e.get("halt") for e in chunk):
                    break
        except Refused as exc:
            code = NOT_STARTED if exc.code == NOT_STARTED and not results else AGENT_LOST
            return {"ok": False, "results": results, "error": str(exc), "code": code}
        return {"ok": all(e["ok"] for e in results), "results": results}

    def run_host_op(self, spec, op):
        """Run one host-side op (see wire_container.runs_on_host): the container's restart."""
        return self.restart(spec, parse_args(op.get("op"), op.get("args", {})))

    def relay(self, spec, request, ops):
        """Send `ops` to the container's agent as one request; return its answer (a dict).

        Raises Refused: NOT_STARTED when it could not be started, AGENT_LOST when it died
        without answering.
        """
        child = self.ensure_child(spec)
        line = {"state_dir": request["state_dir"], "ops": ops}
        line["agent_version"] = request.get("agent_version")
        lines = []
        try:
            child.stdin.write(json.dumps(line).encode("utf-8") + b"\n")
            child.stdin.flush()
            for raw in child.stdout:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if text == END:
                    break
                lines.append(text)
            else:
                raise BrokenPipeError("no answer")
        except (BrokenPipeError, OSError):
            raise self.child_died(spec) from None
        self.answered = True
        # text printed before the answer (a .pth without a newline) may lead BEGIN's line
        begins = [i for i, text in enumerate(lines) if text.endswith(BEGIN)]
        begin = begins[-1] if begins else -1
        return json.loads("\n".join(lines[begin + 1 :]))

    def ensure_child(self, spec):
        """Return the container's agent, started (after an inspect) when there is none."""
        if self.child is not None and self.child.poll() is None:
            return self.child
        self.close()
        self.inspected = self.inspect(spec)
        deadline = time.monotonic() + RESTARTING_WAIT_S
        while self.inspected.restarting and time.monotonic() < deadline:
            time.sleep(0.25)
            self.inspected = self.inspect(spec)
        if not self.inspected.running:
            raise Refused(NOT_STARTED, "container %r is not running" % spec.name)
        self.child_err = tempfile.TemporaryFile()
        try:
            self.child = subprocess.Popen(
                list(spec.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.child_err,
            )
        except OSError as exc:
            raise Refused(NOT_STARTED, "cannot run %s: %s" % (spec.runtime, exc)) from None
        self.answered = False
        sources = getattr(sys.modules.get(__package__), "SOURCES", None)
        if sources is None:  # imported from the source tree (tests): the files beside us
            sources = bundle_sources(os.path.dirname(os.path.abspath(__file__)))
        try:
            self.child.stdin.write(pack_bundle(sources))
        except (BrokenPipeError, OSError):
            pass  # it died at once: the request's read says why
        return self.child

    def child_died(self, spec):
        """The container's agent ended without an answer: return the Refused that says so
        (NOT_STARTED when it never answered and exited 126/127: its python is not there)."""
        child, answered = self.child, self.answered
        try:
            code = child.wait(timeout=CHILD_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait()
        tail = self.read_stderr().strip() or "no output"
        self.close()
        where = "in container %r (%s exec, exit %s): %s" % (spec.name, spec.runtime, code, tail)
        if not answered and code in CANNOT_START:
            python = spec.argv[4] if len(spec.argv) > 4 else "python"
            return Refused(NOT_STARTED, "cannot start the agent's python %s %s" % (python, where))
        return Refused(AGENT_LOST, "the agent died without an answer " + where)

    def read_stderr(self):
        """Return the last characters the container's agent (or its runtime) wrote to stderr."""
        if self.child_err is None:
            return ""
        self.child_err.seek(0)
        return self.child_err.read().decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]

    def inspect(self, spec):
        """Return the container's ContainerFacts; raises Refused(NOT_STARTED) when the runtime
        is missing, knows no such container, or answers something unreadable."""
        argv = [spec.runtime, "inspect", "--type", "container", spec.name]
        code, output, errors = inspect_output(argv)
        if code == 127 and output.startswith("command not found"):
            message = "container runtime %r not found on the host (PATH=%s)" % (
                spec.runtime,
                os.environ.get("PATH", ""),
            )
            raise Refused(NOT_STARTED, message)
        if code != 0:
            why = (output + errors).strip()[-STDERR_TAIL_CHARS:]
            if "no such" in why.lower():
                raise Refused(NOT_STARTED, "no container %r on the host (%s)" % (spec.name, why))
            message = "%s inspect %s exited %s: %s" % (spec.runtime, spec.name, code, why)
            raise Refused(NOT_STARTED, message)
        try:
            return read_inspect(spec, json.loads(output))
        except (ValueError, KeyError) as exc:
            message = "unreadable %s inspect of %r: %s" % (spec.runtime, spec.name, exc)
            raise Refused(NOT_STARTED, message) from None

    def restart(self, spec, args):
        """Op restart of a `container` service: `RUNTIME restart NAME` on the host, then
        inspect: it must be running again; return a RestartResult carrying the container.

        The container's agent is ended first (the restart would kill it anyway); the next
        container op starts a fresh one. Raises OpFailed(restart_failed) with the runtime's
        output and the container's log.
        """
        self.close()
        code, output = run_argv([spec.runtime, "restart", spec.name], args.timeout_s)
        if code != 0:
            message = "%s restart %s exited %s" % (spec.runtime, spec.name, code)
            raise OpFailed(Code.RESTART_FAILED, message, ServiceFailure(output, self.logs(spec)))
        try:
            self.inspected = self.inspect(spec)
        except Refused as exc:
            why = ServiceFailure(log=self.logs(spec))
            raise OpFailed(Code.RESTART_FAILED, str(exc), why) from None
        if not self.inspected.running:
            message = "container %r is not running after the restart" % spec.name
            raise OpFailed(Code.RESTART_FAILED, message, ServiceFailure(log=self.logs(spec)))
        self.restarted = (self.inspected, time.monotonic())
        return RestartResult(restarted=True, container=self.inspected)

    def died_starting(self, spec, op, exc):
        """The health wait's container watchdog: when the container's agent died while op
        `health` waited after our restart, and the container exited, was restarted by its
        restart policy or is gone (wire_container.died_while_starting), return the health
        op's UNHEALTHY entry saying so, with the container's log; else None (a lost agent)."""
        if exc.code != AGENT_LOST or op.get("op") != OpName.HEALTH or self.restarted is None:
            return None
        before, at = self.restarted
        try:
            now = self.inspect(spec)
        except Refused:
            now = None
        why = died_while_starting(before, now, time.monotonic() - at)
        if why is None:
            return None
        service = ((op.get("args") or {}).get("service") or {}).get("name")
        data = ServiceFailure(log=self.logs(spec), progress=[], service=service)

        def fail():
            raise OpFailed(Code.UNHEALTHY, why, data)

        entry = run_entry(OpName.HEALTH.value, fail)[0]
        entry["duration_s"] = round(time.monotonic() - at, 4)  # the wait, from the restart
        return entry

    def logs(self, spec):
        """Return the container's last 50 log lines (`RUNTIME logs --tail 50 NAME`)."""
        return run_argv([spec.runtime, "logs", "--tail", "50", spec.name], LOGS_TIMEOUT_S)[1]

    def add_container(self, spec, entry):
        """Return a container op's entry with what the host knows added: the container as
        inspected on a facts answer; the container's log on a failed health check."""
        data = entry.get("data")
        if entry.get("op") == OpName.FACTS and entry["ok"] and isinstance(data, dict):
            if self.inspected is not None:
                data["container"] = self.inspected.to_dict()
        if entry.get("code") == Code.UNHEALTHY.value and isinstance(data, dict):
            if not data.get("log"):
                data["log"] = self.logs(spec)
        return entry

    def close(self):
        """End the container's agent, if any: EOF on its stdin, then wait (kill if stuck)."""
        child, self.child = self.child, None
        if child is not None:
            try:
                child.stdin.close()
            except OSError:
                pass
            try:
                child.wait(timeout=CHILD_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            child.stdout.close()
        if self.child_err is not None:
            self.child_err.close()
            self.child_err = None
