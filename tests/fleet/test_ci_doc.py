"""docs/ci.md stays true: its event schema, stage list, exit codes and CI examples."""

from __future__ import annotations

import json
import re
import shlex

import typer
import yaml

from ddtree_deploy.cli import app, exit_codes
from ddtree_deploy.events import EVENT_SCHEMA_VERSION, STAGE_ORDER, Event
from tests.support import REPO

DOC = (REPO / "docs" / "ci.md").read_text()


def fenced(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, flags=re.S)


def test_documented_json_schema_is_the_event_model():
    schemas = [json.loads(b) for b in fenced("json") if '"properties"' in b]
    assert schemas == [Event.model_json_schema()]
    assert f"**Schema version: {EVENT_SCHEMA_VERSION}**" in DOC


def test_documented_example_line_is_a_valid_event():
    (example,) = [b for b in fenced("json") if '"stage": "summary"' in b]
    event = Event.model_validate_json(example)
    assert event.schema_version == EVENT_SCHEMA_VERSION
    assert set(event.data) == {
        "outcome", "deploy_id", "version_now", "duration_s", "wave", "command"
    }  # fmt: skip


def test_documented_stage_order_and_exit_codes():
    assert ", ".join(f"`{s}`" for s in STAGE_ORDER) in " ".join(DOC.split())
    for name in ("OK", "ROLLED_BACK", "BAD_INPUT", "NEEDS_ATTENTION", "LOCKED"):
        assert re.search(rf"^\| {getattr(exit_codes, name)} \|", DOC, flags=re.M), name


def _commands(block: str) -> list[list[str]]:
    """ddtree-deploy invocations in a CI file, folded lines joined, redirects dropped."""
    text = yaml.safe_load(block)
    found: list[list[str]] = []

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and node.lstrip().startswith("ddtree-deploy "):
            words = shlex.split(node.split(">", 1)[0] if " > " in node else node)
            found.append(words[1:])

    walk(text)
    return found


def test_ci_examples_parse_and_use_real_options():
    blocks = [b for b in fenced("yaml") if b.startswith(("name:", "stages:"))]
    assert len(blocks) == 2  # GitHub Actions, GitLab CI
    root = typer.main.get_command(app)
    seen = set()
    for block in blocks:
        commands = _commands(block)
        assert [c[0] for c in commands] == ["plan", "push"]
        assert "--junit" in " ".join(commands[1]) and "--canary" in commands[1]
        for words in commands:
            command = root.commands[words[0]]
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            options = {w.split("=")[0] for w in words if w.startswith("-")}
            assert options <= known, options - known
            seen.add(words[0])
    assert seen == {"plan", "push"}
