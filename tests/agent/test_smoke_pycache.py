"""A suite reads bytecode where the host's python does: the smoke op runs each suite with
`-I` (which drops PYTHON* variables), so PYTHONPYCACHEPREFIX comes back as
`-X pycache_prefix`, and the imports suite passes it on to the interpreters it starts.
`export dir|k8s --verify` relies on it: the mount variants mount result files over an
image's stale bytecode and point the cache elsewhere with that variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOW = "import json, sys; print(json.dumps([sys.pycache_prefix, sys.flags.isolated]))"


def argv_under(prefix: str | None, what: str) -> list[str]:
    """The argv `what` builds: "suite": ops_smoke.suite_argv in a python (the agent's) whose
    environment has PYTHONPYCACHEPREFIX=prefix; "child": imports.python_flags in a suite's
    python (-I, and -X pycache_prefix=prefix as the agent passes it). None: no prefix."""
    code = {
        "suite": "from ddtree_deploy.agent.host.ops_smoke import suite_argv as f;"
        "print(json.dumps(f('W', 'S')))",
        "child": "import sys; sys.path.insert(0, 'ddtree_deploy/smoke'); "
        "from imports import python_flags as f; print(json.dumps(f()))",
    }[what]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    if prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = prefix
    flags = ["-I"] if what == "child" else []
    if what == "child" and prefix is not None:
        flags += ["-X", f"pycache_prefix={prefix}"]
    done = subprocess.run(
        [sys.executable, *flags, "-c", "import json;" + code],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.parametrize("prefix", ["/tmp/ddtree-pycache", None])
def test_a_suite_keeps_its_agents_bytecode_prefix(prefix):
    argv = argv_under(prefix, "suite")
    flags = argv[1 : argv.index("-c")]
    # run the suite's interpreter with its flags and the variable still set: -I drops it
    env = {**os.environ, "PYTHONPYCACHEPREFIX": "/elsewhere"}
    shown = subprocess.run(
        [sys.executable, *flags, "-c", SHOW], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(shown.stdout) == [prefix, 1]  # None: the negative control


def test_the_imports_suites_children_keep_it_too():
    assert argv_under("/tmp/p", "child") == ["-I", "-X", "pycache_prefix=/tmp/p"]
    assert argv_under(None, "child") == ["-I"]
