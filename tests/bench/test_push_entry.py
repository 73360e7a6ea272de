"""bench/ddtree_push.py starts the CLI as the console script does, so the bench times the
start users get: the collector paused for the CLI's imports and what they made frozen
(ddtree_deploy.__main__.main), the `invoke` stand-in in place before the command runs
(cli.main). Without them the bench timed about 0.15 s more per push (bench/NOTES.md,
2026-12-06). tests/cli/test_startup.py holds the console script itself to the same state.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

ENTRY = REPO / "bench" / "ddtree_push.py"


def test_the_bench_entry_starts_the_cli_as_the_console_script_does(tmp_path):
    code = (
        "import atexit, gc, runpy, sys\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 10000,"
        " type(sys.modules.get('invoke')).__name__))\n"
        f"sys.argv = [{str(ENTRY)!r}, {str(tmp_path / 'stats.json')!r}, '--help']\n"
        f"sys.path.insert(0, {str(ENTRY.parent)!r})\n"
        f"runpy.run_path({str(ENTRY)!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["True", "True", "Deferred"]
    assert (tmp_path / "stats.json").exists()
