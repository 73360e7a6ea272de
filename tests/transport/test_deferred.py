"""Invoke is imported on first use, not with Paramiko (lazy.defer_invoke), and ssh_config's
`Match exec` still runs its command through it. Each check runs in a fresh interpreter: this
test process may have imported Invoke already."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ddtree_deploy.lazy import Deferred, defer_import


def run_fresh(code: str) -> str:
    """stdout of `code` run by a new python (this one's path), which must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_connecting_code_loads_without_invoke_and_match_exec_still_runs_it():
    out = run_fresh(
        """
        import sys
        from ddtree_deploy.lazy import defer_invoke
        assert defer_invoke()  # what the console script does before any command
        import ddtree_deploy.transport.ssh
        import paramiko
        print("loaded" if "invoke.collection" in sys.modules else "deferred")
        text = "Match exec true\\n  User yes\\nMatch exec false\\n  Port 2200\\n"
        print(paramiko.SSHConfig.from_text(text).lookup("h"))
        print("loaded" if "invoke.collection" in sys.modules else "deferred")
        print(type(sys.modules["invoke"]).__name__)
        """
    )
    lines = out.splitlines()
    assert lines[0] == "deferred"
    assert lines[1] == str({"user": "yes", "hostname": "h"})  # true matched, false did not
    assert lines[2:] == ["loaded", "module"]  # the real one, back under its name


def test_from_import_reads_through_the_stand_in():
    out = run_fresh(
        """
        import ddtree_deploy.lazy, ddtree_deploy.transport
        ddtree_deploy.lazy.defer_invoke()
        from invoke import Context
        import invoke
        print(Context.__module__, invoke.Context is Context)
        """
    )
    assert out.split() == ["invoke.context", "True"]


def test_importing_the_transports_leaves_invoke_alone_and_paramiko_loads_the_real_one():
    """No import-time side effect: only defer_invoke (the console script) puts the stand-in
    in place, and it declines once Paramiko is loaded (the stand-in would come too late)."""
    out = run_fresh(
        """
        import sys
        import ddtree_deploy.transport, ddtree_deploy.transport.ssh, paramiko
        print(type(sys.modules.get("invoke")).__name__, "invoke.collection" in sys.modules)
        print(ddtree_deploy.lazy.defer_invoke())
        """
    )
    assert out.split() == ["module", "True", "False"]


def test_no_stand_in_for_a_module_that_is_missing_or_already_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "no_such_module_here", raising=False)
    assert not defer_import("no_such_module_here")
    assert "no_such_module_here" not in sys.modules
    assert not defer_import("json")  # imported already: left as it is
    assert not isinstance(sys.modules["json"], Deferred)


def test_a_broken_install_raises_at_first_use(monkeypatch, tmp_path):
    (tmp_path / "broken_mod_for_test.py").write_text("raise ImportError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_mod_for_test", raising=False)
    assert defer_import("broken_mod_for_test")
    stand_in = sys.modules["broken_mod_for_test"]
    with pytest.raises(ImportError, match="broken on purpose"):
        stand_in.anything  # noqa: B018  (the read is the test)
    sys.modules.pop("broken_mod_for_test", None)
