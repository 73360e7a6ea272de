"""Terminal escapes from a host never reach the operator's console (report/clean.py).

A real sshd host says hostile things two ways: a patched module whose import error carries
an OSC (retitle, ended by BEL), CSI sequences (clear screen, blink), a bare CR, a C1 CSI
(`\\x9b`) and Rich markup (`[red]`) — quoted by the smoke suite, the push's failure and its
summary — and a host python that writes the same to stderr and dies (quoted in the lost
agent's error). stderr (events, summary table), the Markdown summary and JUnit hold none of
those bytes and still read; `--json` on stdout keeps them, escaped by JSON. Control: the
same push run with report/clean.py's pattern replaced by one that matches nothing (`_BYPASS`,
in that CLI process only) leaks the ESC and C1 sequences to stderr.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.support import REPO, make_patchset, run_cli, utils_file

pytestmark = pytest.mark.hosts
EVIL = (
    "\x1b]0;pwned title\x07 \x1b[2J\x1b[5;31mblinking\x1b[0m \r"
    "overwritten \x9b2Jc1-cleared [red]markup[/red] end"
)
LEAKS = ("\x1b", "\x9b", "\r", "\x07")
READABLE = ("blinking", "overwritten", "c1-cleared", "[red]markup[/red] end")

# A CLI run with report/clean.py's sanitiser bypassed: the control of the tests below.
_BYPASS = (
    "import runpy, sys\n"
    "import ddtree_deploy.report.clean as clean\n"
    "clean._ESCAPES = clean.re.compile('(?!)')  # matches nothing: the sanitiser bypassed\n"
    "sys.argv = ['ddtree-deploy', *sys.argv[1:]]\n"
    "runpy.run_module('ddtree_deploy', run_name='__main__')\n"
)


def _cli(*args: str, bypass: bool = False):
    if not bypass:
        return run_cli(*args)
    import subprocess

    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", _BYPASS, *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)  # fmt: skip


def _evil_import(root) -> None:
    path = utils_file(root)
    path.write_text(path.read_text() + f"\nraise RuntimeError({EVIL!r})\n")


def _assert_clean(text: str, where: str) -> None:
    leaked = [repr(c) for c in LEAKS if c in text]
    assert not leaked, f"{where} leaks {leaked}: {text[-2000:]!r}"
    missing = [word for word in READABLE if word not in text]
    assert not missing, f"{where} lost {missing}: {text[-2000:]!r}"


def test_a_hosts_escapes_in_smoke_output_never_reach_the_console(sandbox_factory, tmp_path):
    """The import error's traceback is quoted whole in JUnit, its first line on stderr and
    in the Markdown summary; --json carries the check's detail with the bytes escaped."""
    sandbox = sandbox_factory(1)
    patchsets = make_patchset(tmp_path / "ps", suites=["imports"], mutate=_evil_import)
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    done = _cli(
        "push", "-H", "host0", "-i", str(sandbox.inventory_path), "--patchsets-dir",
        str(patchsets), "--json", "--junit", str(junit), "--summary-file", str(summary),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    _assert_clean(junit.read_text(), "JUnit")
    for text, where in ((done.stderr, "stderr"), (summary.read_text(), "the Markdown summary")):
        leaked = [repr(c) for c in LEAKS if c in text]
        assert not leaked and "imports" in text, f"{where} leaks {leaked}: {text[-2000:]!r}"
    # --json keeps what the host said, escaped by JSON
    assert "\\u001b]0;pwned title\\u0007" in done.stdout  # (JSON leaves C1 as UTF-8)


def test_a_hosts_escapes_on_the_agents_stderr_never_reach_the_console(sandbox_factory, tmp_path):
    """The host's python prints EVIL on stderr and dies: the push quotes it (exit 3) on
    stderr, in the Markdown summary and in JUnit, cleaned; --json keeps it escaped.
    Control: the same push with the sanitiser bypassed leaks ESC, BEL, CR and C1 CSI."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    script = host.service_dir_on_disk / "evilpy"
    script.write_text(f"#!/bin/sh\nprintf '%s' {_sh_quote(EVIL)} >&2\nexit 1\n")
    script.chmod(0o755)
    inv = sandbox.inventory_path
    inv.write_text(inv.read_text().replace('python = "/srv/venv/bin/python"',
                                           'python = "/srv/service/evilpy"', 1))  # fmt: skip
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    push = ("push", "-H", "host0", "-i", str(inv), "--patchsets-dir", str(patchsets))
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    done = _cli(*push, "--junit", str(junit), "--summary-file", str(summary))
    assert done.returncode == 3, done.stderr[-3000:]
    _assert_clean(done.stderr, "stderr")
    assert "pwned" not in done.stderr  # an OSC's payload is an instruction, not text
    _assert_clean(summary.read_text(), "the Markdown summary")
    _assert_clean(junit.read_text(), "JUnit")
    as_json = _cli(*push, "--json")
    assert "\\u001b]0;pwned title\\u0007" in as_json.stdout and "\\r" in as_json.stdout
    bypassed = _cli(*push, bypass=True)
    assert bypassed.returncode == 3, bypassed.stderr[-3000:]
    # (Rich's own Text drops BEL and CR, not ESC or C1: the sequences get through whole)
    for leak in ("\x1b[2J", "\x1b]0;pwned title", "\x9b2J"):
        assert leak in bypassed.stderr, (leak, bypassed.stderr[-3000:])


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
