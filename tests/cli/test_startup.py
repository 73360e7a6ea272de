"""What a command loads at start-up: only what it needs (start-up time is part of every
push's wall time, bench scenario A). Each check runs the real CLI in a fresh python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Run a command line in-process after a fresh start, then print the modules it loaded.
PROBE = """
import json, sys
from ddtree_deploy.cli import app
try:
    app(args=sys.argv[1:], prog_name="ddtree-deploy")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
"""
# Heavy modules and what needs them: none is needed to print help or to refuse bad input.
# (pygments is not among them for --help: Typer's help renders Markdown through Rich.)
DEFERRED = {
    "paramiko": "the SSH transport (first connect)",
    "prometheus_client": "the serving gate's /metrics rules",
    "ddtree_deploy.transport.ssh": "the SSH transport",
    "ddtree_deploy.patchset.author": "`patchset new`",
    "ddtree_deploy.patchset.port_write": "`patchset port`",
    "ddtree_deploy.pipeline.capture": "`patchset new --from-host`",
}


def modules_loaded(*args: str) -> set[str]:
    """The modules a fresh `ddtree-deploy ARGS` had loaded when it ended."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=REPO
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["push", "--help"], ["patchset", "list", "--help"]])
def test_help_loads_no_transport_gate_or_authoring_module(args):
    loaded = modules_loaded(*args)
    assert "typer" in loaded  # the probe did run the CLI
    assert {name: why for name, why in DEFERRED.items() if name in loaded} == {}


def test_a_push_refused_before_any_connect_loads_no_ssh_and_no_pygments(tmp_path):
    """Bad input (no such inventory) ends the push before a host is contacted: the command
    body ran, its pipeline loaded, yet neither Paramiko nor pygments (patchset diff's)."""
    loaded = modules_loaded("push", "-i", str(tmp_path / "none.toml"), "--all", "--yes")
    assert "ddtree_deploy.pipeline.push" in loaded  # the push body did run
    assert {name: why for name, why in DEFERRED.items() if name in loaded} == {}
    assert "pygments" not in loaded


def test_the_deferred_modules_still_load_where_they_are_needed():
    """Negative control: the same probe sees them once a command asks for them."""
    loaded = modules_loaded("patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0")
    assert {"pygments", "ddtree_deploy.patchset.compare"} <= loaded
    from ddtree_deploy.transport import SSHTransport  # the lazy name resolves

    assert SSHTransport.__module__ == "ddtree_deploy.transport.ssh"
