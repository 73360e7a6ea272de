"""The `imports` suite's fork mode on a real interpreter: a temp site-packages of small
modules that import, raise, crash, hang, import each other in a circle, or make fork unsafe.

Each test runs the suite script as the agent does (this python, JSON on stdin, one JSON
line out) in fork mode and, where the verdicts must match, in isolated mode too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_deploy.stages import default_smoke_dir

SUITE = default_smoke_dir() / "imports.py"
TIMEOUT_S = 2.0


def make_site(root: Path, modules: dict[str, str]) -> Path:
    """Write `modules` ({dotted name: source}) as a site-packages under root."""
    site = root / "site"
    for name, source in modules.items():
        parts = name.split(".")
        for depth in range(1, len(parts)):
            init = site.joinpath(*parts[:depth], "__init__.py")
            init.parent.mkdir(parents=True, exist_ok=True)
            init.touch()
        path = site.joinpath(*parts[:-1], parts[-1] + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return site


def run_suite(site: Path, patched: list[str], isolated: bool = False) -> dict:
    """Run the imports suite with `site` on sys.path; return its result line."""
    request = {
        "site_packages": str(site),
        "modules": patched,
        "files": [{"path": m.replace(".", "/") + ".py"} for m in patched],
        "options": {"imports": {"isolated": isolated, "timeout_s": TIMEOUT_S}},
    }
    done = subprocess.run(
        [sys.executable, str(SUITE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1])


def checks(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


def verdicts(result: dict) -> dict[str, bool]:
    return {name: c["passed"] for name, c in checks(result).items() if name != "mode"}


FAILURES = {
    "pkg.ok": "import json\nVALUE = 1\n",
    "pkg.raises": "raise ImportError('no such kernel')\n",
    "pkg.crashes": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "pkg.hangs": "import time\ntime.sleep(600)\n",
    "pkg.exits": "import sys\nsys.exit(3)\n",
}


@pytest.mark.parametrize("isolated", [False, True], ids=["fork", "isolated"])
def test_each_failure_is_named_on_its_own_module(tmp_path, isolated):
    site = make_site(tmp_path, FAILURES)
    result = run_suite(site, list(FAILURES), isolated=isolated)

    found = checks(result)
    assert not result["passed"]
    assert verdicts(result) == {
        "pkg.ok": True,
        "pkg.raises": False,
        "pkg.crashes": False,
        "pkg.hangs": False,
        "pkg.exits": False,
    }
    assert "ImportError: no such kernel" in found["pkg.raises"]["detail"]
    assert "did not finish in 2.0s: killed" in found["pkg.hangs"]["detail"]
    assert "SystemExit: 3" in found["pkg.exits"]["detail"]
    assert "interpreter died" in found["pkg.crashes"]["detail"]
    assert found["mode"]["detail"].startswith("isolated" if isolated else "fork:")


def test_a_hanging_dependent_is_killed_and_named_and_the_rest_of_its_group_still_imports(
    tmp_path,
):
    site = make_site(
        tmp_path,
        {
            "pkg.patched": "VALUE = 1\n",
            "pkg.a_hangs": "import time\nfrom pkg import patched\ntime.sleep(600)\n",
            "pkg.b_ok": "from pkg.patched import VALUE\n",
            "pkg.c_missing": "from pkg.patched import MISSING\n",
            "pkg.d_crashes": "import os, signal\nfrom pkg import patched\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
            "pkg.e_ok": "import pkg.patched\n",
        },
    )
    result = run_suite(site, ["pkg.patched"])

    found = checks(result)
    assert verdicts(result) == {
        "pkg.patched": True,
        "pkg.a_hangs": False,
        "pkg.b_ok": True,
        "pkg.c_missing": False,
        "pkg.d_crashes": False,
        "pkg.e_ok": True,
    }
    assert "import of pkg.a_hangs did not finish in 2.0s: killed" in found["pkg.a_hangs"]["detail"]
    assert "interpreter died (signal 9)" in found["pkg.d_crashes"]["detail"]
    assert "MISSING" in found["pkg.c_missing"]["detail"]
    assert "6 modules in 2 processes" in found["mode"]["detail"]


SHARED_COUNTER = """\
import os
with open(os.environ.get("COUNTER", "{counter}"), "a") as fh:
    fh.write("imported\\n")
"""


def test_what_the_patched_modules_share_is_imported_once_in_fork_mode(tmp_path):
    counter = tmp_path / "counter"
    site = make_site(
        tmp_path,
        {
            "shared_heavy": SHARED_COUNTER.format(counter=counter),
            "pkg.one": "import shared_heavy\n",
            "pkg.two": "import shared_heavy\n",
            "pkg.three": "import shared_heavy\n",
        },
    )
    patched = ["pkg.one", "pkg.two", "pkg.three"]

    forked = run_suite(site, patched)
    imported_forked = counter.read_text().count("imported")
    counter.unlink()
    isolated = run_suite(site, patched, isolated=True)

    assert forked["passed"] and isolated["passed"]
    assert imported_forked == 1  # the warm parent, once; each child found it imported
    assert counter.read_text().count("imported") == 3  # once per fresh interpreter
    assert "1 shared imports kept" in checks(forked)["mode"]["detail"]


def test_a_circular_import_the_patch_adds_fails_in_fork_mode_as_in_a_fresh_process(tmp_path):
    """pkg.patched imports other.helper, which imports a name back from pkg.patched: a fresh
    `import pkg.patched` fails (partially initialised module). The warm parent must not
    import other.helper first, or the child would find it loaded and pass."""
    site = make_site(
        tmp_path,
        {
            "pkg.patched": "from other.helper import HELP\nVALUE = 1\n",
            "other.helper": "from pkg.patched import VALUE\nHELP = VALUE + 1\n",
        },
    )
    forked = run_suite(site, ["pkg.patched"])
    isolated = run_suite(site, ["pkg.patched"], isolated=True)

    for result in (forked, isolated):
        assert verdicts(result)["pkg.patched"] is False
        assert "partially initialized module" in checks(result)["pkg.patched"]["detail"]
    assert "0 shared imports kept" in checks(forked)["mode"]["detail"]


def test_an_optional_import_of_the_patch_is_not_warmed_with_its_fallback(tmp_path):
    """other.user imports pkg.patched inside try/except ImportError: warmed while the patch
    is refused, it would keep its fallback; it must be evicted and imported by the child."""
    site = make_site(
        tmp_path,
        {
            "pkg.patched": "VALUE = 1\n",
            "other.user": "try:\n    from pkg.patched import VALUE\nexcept ImportError:\n"
            "    VALUE = None\n",
            "pkg.entry": "import other.user\nassert other.user.VALUE == 1, 'the fallback'\n",
        },
    )
    result = run_suite(site, ["pkg.entry", "pkg.patched"])
    assert result["passed"], result["details"]


def test_fork_falls_back_to_fresh_interpreters_when_cuda_was_initialised(tmp_path):
    site = make_site(
        tmp_path,
        {
            "torch.__init__": "from torch import cuda\n",
            "torch.cuda": "def is_initialized():\n    return True\n",
            "pkg.one": "import torch\n",
        },
    )
    result = run_suite(site, ["pkg.one"])
    assert result["passed"]
    mode = checks(result)["mode"]["detail"]
    assert "fell back to fresh interpreters: fork unsafe here: CUDA was initialised" in mode


def test_fork_falls_back_when_the_warm_parent_dies(tmp_path):
    site = make_site(
        tmp_path,
        {
            "kills_its_process": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "pkg.one": "import kills_its_process\n",
            "pkg.two": "VALUE = 2\n",
        },
    )
    result = run_suite(site, ["pkg.one", "pkg.two"])
    assert verdicts(result) == {"pkg.one": False, "pkg.two": True}
    assert "interpreter died" in checks(result)["pkg.one"]["detail"]
    assert "warm parent ended early (exit -9)" in checks(result)["mode"]["detail"]
