"""`push --retry FILE`: bad input (exit 2, naming the file and the problem, no host
contacted), nothing to retry (exit 0), and which hosts it picks from today's inventory.
Real CLI processes for the exits; the selection through `retry_targets` itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from ddtree_deploy.cli.context import RunContext, SharedOptions
from ddtree_deploy.cli.retry import retry_targets
from ddtree_deploy.errors import ConfigError
from ddtree_deploy.results import Outcome
from tests.report.test_retry import push_output
from tests.support import run_cli

INVENTORY = "".join(
    f'[hosts.{n}]\naddress = "127.0.0.1"\nport = {port}\n' for port, n in enumerate("abcdef", 1)
)
ENDS = {
    "a": Outcome.OK,
    "b": Outcome.ROLLED_BACK,
    "c": Outcome.NO_CHANGES,
    "d": Outcome.NEEDS_ATTENTION,
}


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.toml"
    path.write_text(INVENTORY)
    return path


def write(tmp_path: Path, text: str, name: str = "push.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def context(inv: Path, **options: object) -> tuple[RunContext, Console]:
    console = Console(record=True, width=300)
    return RunContext(console, SharedOptions(inventory=inv, **options)), console  # type: ignore[arg-type]


def test_retry_targets_are_exactly_the_hosts_that_need_it(tmp_path, inv):
    run, console = context(inv)
    hosts = retry_targets(run, write(tmp_path, push_output(ENDS)))
    assert [h.name for h in hosts] == ["b", "d"]
    said = console.export_text()
    assert "retrying 2: b (rolled_back), d (needs_attention)" in " ".join(said.split())


def test_limit_and_become_still_apply(tmp_path, inv):
    run, _ = context(inv, limit="d*", become=True)
    hosts = retry_targets(run, write(tmp_path, push_output(ENDS)))
    assert [(h.name, h.become) for h in hosts] == [("d", "sudo")]


def test_nothing_to_retry_is_said_and_selects_none(tmp_path, inv):
    run, console = context(inv)
    ends = {"a": Outcome.OK, "c": Outcome.NO_CHANGES}
    assert retry_targets(run, write(tmp_path, push_output(ends))) == []
    assert "nothing to retry" in console.export_text()


def test_hosts_gone_from_the_inventory_are_named(tmp_path, inv):
    run, _ = context(inv)
    ends = {"b": Outcome.ROLLED_BACK, "x1": Outcome.NOT_STARTED, "x2": Outcome.LOCKED}
    with pytest.raises(ConfigError, match=r"not in the inventory .*: x1, x2$"):
        retry_targets(run, write(tmp_path, push_output(ends)))


def test_hosts_given_too_are_refused(tmp_path, inv):
    run, _ = context(inv, host=["a"])
    with pytest.raises(ConfigError, match="the file picks the hosts"):
        retry_targets(run, write(tmp_path, push_output(ENDS)))


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda tmp: tmp / "none.jsonl", "cannot read: No such file or directory"),
        (lambda tmp: write(tmp, "not json\n"), "line 1: not JSON"),
        (lambda tmp: write(tmp, push_output(ENDS, command="status")), "written by `status`"),
        (lambda tmp: write(tmp, ""), "no host summary in it"),
    ],
)
def test_bad_retry_files_exit_2_naming_file_and_problem(tmp_path, inv, make, said):
    path = make(tmp_path)
    done = run_cli("push", "-i", str(inv), "--retry", str(path), "-y")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: --retry {path}: ") and said in done.stderr


def test_a_retry_host_missing_from_the_inventory_exits_2(tmp_path, inv):
    path = write(tmp_path, push_output({"gone": Outcome.ROLLED_BACK}))
    done = run_cli("push", "-i", str(inv), "--retry", str(path), "-y")
    assert done.returncode == 2 and "not in the inventory" in done.stderr
    assert "gone" in done.stderr


def test_nothing_to_retry_exits_0(tmp_path, inv):
    path = write(tmp_path, push_output({"a": Outcome.OK}))
    done = run_cli("push", "-i", str(inv), "--retry", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert "nothing to retry" in done.stderr and done.stdout == ""


def test_a_restart_groups_partner_is_retried_with_its_member(tmp_path):
    inv = tmp_path / "inv.toml"
    service = '\n[hosts.{}.service]\nkind = "command"\nstart = "run"\nstop = "halt"\n'
    group = '[groups.pair]\nmembers = ["b", "e"]\nleader = "b"\n'
    inv.write_text(INVENTORY + service.format("b") + service.format("e") + group)
    path = write(tmp_path, push_output(ENDS))
    run, console = context(inv)
    assert [h.name for h in retry_targets(run, path)] == ["b", "d", "e"]
    assert "e (its group)" in console.export_text()
    assert [h.name for h in retry_targets(run, path, ignore_groups=True)] == ["b", "d"]
