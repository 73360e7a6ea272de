"""Shared options work before and after the command name and reach the command as a RunContext."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from ddtree_deploy.cli import RunContext, SharedOptions, app
from ddtree_deploy.cli.command import host_command

SHARED_FLAGS = {"--inventory", "--host", "--group", "--all", "--limit", "--shard", "--parallel"}
SHARED_FLAGS |= {"--json", "--junit", "--summary-file", "--verbose", "--quiet", "--become"}
HOST_COMMANDS = [
    ["push"],
    ["plan"],
    ["smoke"],
    ["rollback"],
    ["recover"],
    ["status"],
    ["hosts", "check"],
    ["backups", "list"],
    ["backups", "prune"],
    ["gate"],
]


def probe_app(seen: list[RunContext]) -> typer.Typer:
    """A root like the real one, and one command that records what it got."""
    probe = typer.Typer()

    @probe.callback()
    @host_command
    def root(run: RunContext) -> None:
        pass

    @probe.command()
    @host_command
    def show(run: RunContext, extra: int = 0) -> None:
        seen.append(run)

    @probe.command()
    def plain(ctx: typer.Context) -> None:
        seen.append(ctx.obj)

    return probe


def invoke_probe(*args: str) -> RunContext:
    seen: list[RunContext] = []
    done = CliRunner().invoke(probe_app(seen), list(args), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    (run,) = seen
    return run


def test_shared_options_after_the_command_name():
    run = invoke_probe("show", "-H", "a", "-H", "b", "--json", "--parallel", "3", "--extra", "1")
    assert run.targets.hosts == ["a", "b"]
    assert run.output.json_lines and run.parallel == 3


def test_shared_options_before_the_command_name():
    run = invoke_probe("-g", "prod", "--shard", "1/2", "-v", "show")
    assert run.targets.groups == ["prod"] and run.targets.shard == "1/2"
    assert run.output.verbose


def test_after_the_command_name_wins_and_the_rest_is_kept():
    run = invoke_probe("--parallel", "2", "-H", "a", "show", "--parallel", "5")
    assert run.parallel == 5
    assert run.targets.hosts == ["a"]


def test_verbosity_counts_and_quiet_either_side():
    assert invoke_probe("-vv", "show").output.verbosity == 2
    assert invoke_probe("show", "-v").output.verbosity == 1
    assert invoke_probe("-q", "show").output.verbosity == -1
    assert invoke_probe("show").output.verbosity == 0


def test_the_root_callback_puts_the_run_context_on_ctx_obj():
    run = invoke_probe("--json", "-i", "inv.toml", "plain")
    assert isinstance(run, RunContext)
    assert run.output.json_lines and str(run.targets.inventory) == "inv.toml"


def test_help_shows_the_bracketed_env_hints():
    done = CliRunner().invoke(app, ["push", "--help"], env={"COLUMNS": "250"})
    assert "[env DDTREE_DEPLOY_INVENTORY, else inventories/default.toml]" in done.output
    assert "[env DDTREE_DEPLOY_PATCHSETS]" in done.output


def test_defaults_are_the_shared_option_defaults():
    run = invoke_probe("show")
    assert run.options == SharedOptions()
    assert dataclasses.is_dataclass(run) and run.console.stderr


@pytest.mark.parametrize("words", HOST_COMMANDS, ids=" ".join)
def test_every_host_command_takes_the_shared_options(words):
    command = typer.main.get_command(app)
    for word in words:
        command = command.commands[word]  # type: ignore[attr-defined]
    flags = {o for p in command.params for o in p.opts}
    assert flags >= SHARED_FLAGS


@pytest.mark.parametrize("before", [True, False])
def test_inventory_given_either_side_is_used(tmp_path, before):
    missing = str(tmp_path / "nowhere.toml")
    args = ["-i", missing, "status"] if before else ["status", "-i", missing]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2
    assert f"{missing}: inventory file not found" in " ".join(done.output.split())


def test_error_line_prints_markup_verbatim(tmp_path):
    nasty = tmp_path / "out[b] [anything.lower] [/x"
    done = CliRunner().invoke(app, ["status", "-i", str(nasty), "-H", "a"])
    assert done.exit_code == 2
    text = "".join(done.output.split("\n"))
    assert "error:" in text
    assert "out[b] [anything.lower] [/x" in text


@pytest.mark.parametrize("args", [["--become", "show"], ["show", "--become"]])
def test_become_turns_sudo_on_for_the_selected_hosts_only(tmp_path, args):
    inventory = tmp_path / "inv.toml"
    inventory.write_text(
        '[hosts.a]\naddress = "10.0.0.1"\nbecome_user = "svc"\n[hosts.b]\naddress = "10.0.0.2"\n'
    )
    run = invoke_probe(*args, "-i", str(inventory), "-H", "a")
    (host,) = run.targets.resolve()
    assert (host.name, host.become, host.become_user) == ("a", "sudo", "svc")
    plain = invoke_probe("show", "-i", str(inventory), "--all")
    assert [h.become for h in plain.targets.resolve()] == [None, None]
