"""Run the REAL agent bundle with a bare `python3 -c` bootstrap, as a host would: no sshd,
no root. Tests use it for every op against temp dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ddtree_deploy.agent import agent_command, packed_agent
from ddtree_deploy.agent.host.wire import BEGIN, END
from ddtree_deploy.agent.protocol import agent_version

AGENT_TIMEOUT_S = 120


def request_line(state_dir: Path | str, ops: list[tuple[str, dict]], **extra: object) -> str:
    """One request as its stdin line (JSON), carrying the controller's agent version."""
    request = {
        "agent_version": agent_version(),
        "state_dir": str(state_dir),
        "ops": [{"op": op, "args": args} for op, args in ops],
        **extra,
    }
    return json.dumps(request) + "\n"


def run_agent_lines(
    lines: list[str], python: str = sys.executable, site: Path | None = None
) -> list[dict]:
    """Start one agent process, send the bundle then `lines`; return every framed answer.

    site: a directory put on the agent python's sys.path (a fake site-packages holding
    *.dist-info the facts op can find).
    """
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the bundle, not the source tree, must be what runs
    if site is not None:
        env["PYTHONPATH"] = str(site)
    done = subprocess.run(
        agent_command(python),
        input=packed_agent() + "".join(lines).encode(),
        capture_output=True,
        timeout=AGENT_TIMEOUT_S,
        env=env,
        cwd="/",
    )
    out = done.stdout.decode()
    answers, rest = [], out
    while BEGIN in rest:
        head, _, rest = rest.partition(BEGIN + "\n")
        body, _, rest = rest.partition("\n" + END)
        answers.append(json.loads(body))
    assert answers, f"no answer (exit {done.returncode}): {done.stderr.decode()[-3000:]}"
    return answers


def run_agent(
    state_dir: Path | str, *ops: tuple[str, dict], site: Path | None = None, **extra: object
) -> dict:
    """One request of `ops` ((name, args) pairs) to a fresh bare agent; its answer dict."""
    return run_agent_lines([request_line(state_dir, list(ops), **extra)], site=site)[0]
