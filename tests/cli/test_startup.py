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
# Run a command line in-process after a fresh start, then print the modules it loaded (as
# cli.main runs it: the `invoke` stand-in first).
PROBE = """
import json, sys
from ddtree_deploy.cli import app
from ddtree_deploy.lazy import defer_invoke
defer_invoke()
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


# What a host command loads only after it started opening its first hosts' connections
# (cli/__init__.py, fleet/ahead.py): loading any of them at start-up would put it back on
# the critical path, before the first connect.
AFTER_CONNECTING = {
    "ddtree_deploy.pipeline": "the per-host stages",
    "ddtree_deploy.fleet.run": "the fleet's runner",
    "ddtree_deploy.report": "output (Rich live display, tables, JUnit)",
    "ddtree_deploy.transport": "transports",
    "ddtree_deploy.agent.protocol": "the agent's request and answer models",
}


def test_a_push_refused_before_any_connect_loads_no_ssh_and_no_pygments(tmp_path):
    """Bad input (no such inventory) ends the push before a host is contacted: the command
    body ran, yet neither Paramiko nor pygments (patchset diff's) nor the pipeline loaded."""
    loaded = modules_loaded("push", "-i", str(tmp_path / "none.toml"), "--all", "--yes")
    assert "ddtree_deploy.cli.push" in loaded and "ddtree_deploy.inventory.load" in loaded
    assert {name: why for name, why in DEFERRED.items() if name in loaded} == {}
    assert {name: why for name, why in AFTER_CONNECTING.items() if name in loaded} == {}
    assert "pygments" not in loaded


@pytest.mark.parametrize("args", [["--help"], ["push", "--help"], ["status", "--help"]])
def test_the_cli_starts_without_what_it_needs_only_after_connecting(args):
    loaded = modules_loaded(*args)
    assert "ddtree_deploy.cli.push" in loaded  # every command was declared
    assert {name: why for name, why in AFTER_CONNECTING.items() if name in loaded} == {}


def test_a_command_that_ran_did_load_them_and_no_asyncio(tmp_path):
    """Negative control: a command that gets past its input checks loads them all (here
    `plan` with every host unreachable: the connections fail, the modules are there).

    And asyncio is not among them: nothing a host command runs uses it, and importing it
    cost 70-90 ms of every start (typing-extensions before 4.16 imported it when
    pydantic-core marked a function deprecated)."""
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        '[hosts.dead]\naddress = "127.0.0.1"\nport = 1\nknown_hosts = "/dev/null"\n'
    )
    loaded = modules_loaded("plan", "-i", str(inventory), "--all", "-p", "ddtree@1.0.0")
    assert set(AFTER_CONNECTING) <= loaded
    assert "asyncio" not in loaded


def test_the_probe_sees_asyncio_when_something_loads_it(tmp_path, monkeypatch):
    """Control for the asyncio check above: a sitecustomize importing it shows in the probe."""
    (tmp_path / "sitecustomize.py").write_text("import asyncio\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert "asyncio" in modules_loaded("--help")


def test_the_deferred_modules_still_load_where_they_are_needed():
    """Negative control: the same probe sees them once a command asks for them."""
    loaded = modules_loaded("patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0")
    assert {"pygments", "ddtree_deploy.patchset.compare"} <= loaded
    from ddtree_deploy.transport import SSHTransport  # the lazy name resolves

    assert SSHTransport.__module__ == "ddtree_deploy.transport.ssh"


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    """A fresh `python -c code ARGS` with this checkout first on the path."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=path),
        cwd=REPO,
    )


def test_the_console_script_leaves_with_its_status_and_all_its_output():
    """`cli.main` ends by os._exit (no interpreter teardown): the exit status is the
    command's, and nothing it printed is lost (stdout is flushed first)."""
    main = "from ddtree_deploy.cli import main; main()"
    helped = run_python(main, "push", "--help")
    assert helped.returncode == 0
    last = "Show this message and exit."  # the help's last line: nothing was cut
    assert "--patchset" in helped.stdout and helped.stdout.rstrip().endswith(last)
    refused = run_python(main, "push", "-i", "/no/such/inventory.toml", "--all", "--yes")
    assert refused.returncode == 2  # bad input, as the plain exit said it
    assert "inventory file not found" in refused.stderr


def test_leave_runs_the_atexit_steps_and_reads_the_code_as_sys_exit_does():
    code = (
        "import atexit, sys\n"
        "from ddtree_deploy.cli import leave\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "sys.stdout.write('no newline at the end')\n"
        "leave(sys.argv[1] if sys.argv[1].isalpha() else int(sys.argv[1]))\n"
    )
    done = run_python(code, "3")
    assert (done.returncode, done.stdout) == (3, "no newline at the endatexit ran\n")
    said = run_python(code, "bye")
    assert (said.returncode, said.stderr.strip()) == (1, "bye")


def test_leave_waits_for_a_thread_that_still_runs():
    """Control: with a non-daemon thread alive, leave is a plain exit, which lets it end."""
    code = (
        "import threading, time\n"
        "from ddtree_deploy.cli import leave\n"
        "def late(): time.sleep(0.3); print('thread done', flush=True)\n"
        "threading.Thread(target=late).start()\n"
        "leave(4)\n"
    )
    done = run_python(code)
    assert (done.returncode, done.stdout) == (4, "thread done\n")


def test_start_up_objects_are_frozen_out_of_the_collector():
    """The console script (ddtree_deploy.__main__.main) imports the CLI with the collector
    paused, freezes what it made and turns the collector back on, then runs the command;
    the `invoke` stand-in is in place before the command runs."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 10000,"
        " type(sys.modules.get('invoke')).__name__))\n"
        "from ddtree_deploy.__main__ import main\n"
        "sys.argv = ['ddtree-deploy', '--help']\n"
        "main()\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["True", "True", "Deferred"]


def test_importing_the_package_changes_nothing_process_wide():
    """Negative control for the above: importing the CLI (a library caller, a test run)
    leaves the collector as it was, freezes nothing and puts nothing in sys.modules."""
    code = (
        "import gc, sys\n"
        "import ddtree_deploy.__main__, ddtree_deploy.cli, ddtree_deploy.transport\n"
        "print(gc.isenabled(), gc.get_freeze_count(), 'invoke' in sys.modules)"
    )
    assert run_python(code).stdout.split() == ["True", "0", "False"]
