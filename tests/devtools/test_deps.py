"""The layering check: the real package passes; a deliberately bad tree is caught line by line."""

from __future__ import annotations

from pathlib import Path

import ddtree_deploy
from ddtree_deploy.devtools import deps

REAL_ROOT = Path(ddtree_deploy.__file__).parent

# path -> source; every line that ends with "# bad" must be reported, and only those.
BAD_TREE = {
    "__init__.py": "",
    "__main__.py": "from ddtree_deploy.cli import main\n",
    "cli/__init__.py": "import typer\nimport rich\nfrom ddtree_deploy.fleet import run\n",
    "fleet/__init__.py": "from ddtree_deploy.pipeline import x\n"
    "from ddtree_deploy.cli import app  # bad\n",
    "pipeline/__init__.py": "",
    "pipeline/push.py": "from .. import cli  # bad\nfrom ..stages import y\nfrom . import z\n",
    "report/table.py": "import rich.table\nimport typer  # bad\n",
    # report/ may read the protocol's names (wire.py), nothing else of agent/
    "report/history.py": "from ddtree_deploy.agent.host.wire import JournalState\n"
    "from ddtree_deploy.agent.host import wire\n"
    "from ddtree_deploy.agent.host.wire_results import Facts  # bad\n"
    "from ddtree_deploy.agent.host.wireless import X  # bad\n"
    "from ddtree_deploy.agent import OpResult  # bad\n",
    "stages/__init__.py": "from rich.console import Console  # bad\n"
    "from ddtree_deploy import errors\n",
    "patchset/load.py": "from ddtree_deploy.inventory import Host  # bad\n",
    "agent/host/ops.py": "import json, os\nimport pydantic  # bad\n",
    "agent/host/run.py": "import sys\nfrom ddtree_deploy.errors import X  # bad\n",
    "agent/protocol.py": "import pydantic\nfrom ddtree_deploy.errors import AgentError\n",
    "inventory/load.py": "import ddtree_sandbox.hosts  # bad\n",
    "transport/ssh.py": "from ddtree_deploy.sandbox import hosts  # bad\nimport fabric\n",
    "newroom/a.py": "from ddtree_deploy.errors import X  # bad\n",
    "gate/compare.py": "import prometheus_client.parser\nfrom ddtree_deploy.agent import Op\n"
    "from ddtree_deploy.pipeline import x  # bad\n",
    "report/metrics.py": "from prometheus_client import parser  # bad\n",
    "pipeline/gate.py": "from ddtree_deploy.gate import compare\n",
    "events.py": "from ddtree_deploy import __version__\n",
    "errors.py": "",
    "sandbox/hosts.py": "import typer\nfrom ddtree_deploy.cli import app\n",  # not scanned
}


def write_tree(base: Path) -> Path:
    root = base / "ddtree_deploy"
    for name, source in BAD_TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def expected_lines(root: Path) -> set[tuple[Path, int]]:
    return {
        (root / name, number)
        for name, source in BAD_TREE.items()
        for number, line in enumerate(source.splitlines(), start=1)
        if line.endswith("# bad")
    }


def test_the_real_package_keeps_its_layering(capsys):
    assert deps.check_tree(REAL_ROOT) == []
    assert deps.main([str(REAL_ROOT)]) == 0
    assert "layering ok" in capsys.readouterr().err


def test_a_bad_tree_is_caught_at_each_bad_line(tmp_path):
    root = write_tree(tmp_path)
    found = deps.check_tree(root)
    assert {(v.path, v.line) for v in found} == expected_lines(root)
    messages = {v.path.relative_to(root).as_posix(): v.message for v in found}
    assert messages["fleet/__init__.py"] == "fleet may not import cli (ddtree_deploy.cli.app)"
    assert messages["pipeline/push.py"] == "pipeline may not import cli (ddtree_deploy.cli)"
    assert messages["report/table.py"] == "report imports typer: only cli may"
    assert (
        messages["report/history.py"]
        == "report may not import agent (ddtree_deploy.agent.OpResult)"
    )
    assert "stdlib only" in messages["agent/host/ops.py"]
    assert "test sandbox" in messages["inventory/load.py"]
    assert "not in the ALLOWED table" in messages["newroom/a.py"]


def test_main_prints_file_and_line_and_exits_1(tmp_path, capsys):
    root = write_tree(tmp_path)
    assert deps.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{root / 'report' / 'table.py'}:2: report imports typer" in out
    assert len(out.splitlines()) == len(expected_lines(root))
