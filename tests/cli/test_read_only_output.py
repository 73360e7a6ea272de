"""Read-only commands write their result to stdout and people's lines to stderr; --json
keeps stdout pure JSON Lines (the table moves to stderr). One real sshd host (the sandbox),
the real CLI in a subprocess, stdout a pipe as in `... | grep`."""

from __future__ import annotations

import json

from tests.support import make_patchset, run_cli

# command -> the title of its result table
READ_ONLY = {
    ("plan", "-p", "ddtree@1.0.0", "--patchsets-dir"): "plan",
    ("status", "--patchsets-dir"): "status",
    ("hosts", "check", "-p", "ddtree@1.0.0", "--patchsets-dir"): "hosts check",
    ("backups", "list"): "backups",
}


def test_results_on_stdout_json_keeps_stdout_pure_and_nothing_is_cut(
    sandbox_factory, tmp_path
) -> None:
    sandbox = sandbox_factory(1)
    patchsets = make_patchset(tmp_path / "fast")
    one_host = ["-i", str(sandbox.inventory_path), "--all"]
    for named, title in READ_ONLY.items():
        command = [*named, str(patchsets)] if named[-1] == "--patchsets-dir" else list(named)
        done = run_cli(*command, *one_host)
        assert done.returncode == 0, (command, done.stderr[-3000:])
        assert done.stdout.lstrip().startswith(title), (command, done.stdout)
        if title != "backups":  # a fresh host has none: the table is its header alone
            assert any("host0" in ln for ln in done.stdout.splitlines()), (command, done.stdout)
        assert "┏" not in done.stderr, (command, done.stderr)  # no table for people
        as_json = run_cli(*command, *one_host, "--json")
        assert as_json.returncode == 0, (command, as_json.stderr[-3000:])
        events = [json.loads(line) for line in as_json.stdout.splitlines()]  # all JSON
        assert any(e.get("host") == "host0" for e in events), command
        assert "┏" in as_json.stderr, command  # the table, for people, on stderr
    # piped with COLUMNS=80, the long paths of `hosts check` come through whole
    command = ["hosts", "check", "-p", "ddtree@1.0.0", "--patchsets-dir", str(patchsets)]
    done = run_cli(*command, *one_host, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "…" not in done.stdout and max(map(len, done.stdout.splitlines())) > 80
