"""The lock pins patchset.toml (spec_lock.py) and a locked version is immutable.

Every shipped version verifies; in a copy of each, editing any table ([target], [[file]],
[smoke], [serve], [lossless], an added [gate], a top-level key) is refused by `patchset
verify` and by push's local gate (exit 2, naming the table and key); `description` and the
`shared` flags change no push and stay free. `patchset lock` refuses to rewrite a lock;
`--force` rewrites it, `--upgrade` only adds the record to a lock written before it existed.
Local only (the pinned wheels are cached).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.patchset import check_sources, copy_version, load_patchset
from ddtree_deploy.patchset.spec_lock import lockable_spec, spec_digest
from tests.support import REPO, make_patchset, run_cli

DDTREE = REPO / "patchsets" / "ddtree"
SHIPPED = sorted(p.parent.name for p in DDTREE.glob("*/patchset.toml"))
LOCK = "patchset.lock.json"


def patchset_cli(base: Path, *args: str) -> tuple[int, str]:
    """Run `ddtree-deploy patchset ARGS --patchsets-dir base`; exit code and one-line output."""
    done = CliRunner().invoke(
        app, ["patchset", *args, "--patchsets-dir", str(base)], env={"COLUMNS": "400"}
    )
    return done.exit_code, " ".join(done.output.split())


def copy_shipped(tmp_path: Path) -> Path:
    """A copy of patchsets/ (every ddtree version and the store); returns its folder."""
    shutil.copytree(DDTREE, tmp_path / "patchsets" / "ddtree")
    return tmp_path / "patchsets"


def edit_toml(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    spec_path = root / "patchset.toml"
    data = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    change(data)
    spec_path.write_text(tomli_w.dumps(data), encoding="utf-8")


def _budget_64(data: dict[str, Any]) -> None:
    args = data["serve"]["args"]
    args[args.index("--speculative-ddtree-budget") + 1] = "64"


# table edited -> (the edit, what the error must name). Each keeps the spec valid.
EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "serve_budget": (_budget_64, "[serve] args"),
    "serve_env": (lambda d: d["serve"].setdefault("env", {}).update(X="1"), "[serve] env"),
    "smoke_suites": (lambda d: d["smoke"].update(suites=["integrity"]), "[smoke] suites"),
    "smoke_after_restart": (lambda d: d["smoke"].update(after_restart=[]), "[smoke] after_restart"),
    "lossless_min_accept": (
        lambda d: d["lossless"].update(min_accept_length=0),
        "[lossless] min_accept_length",
    ),
    "lossless_prompts": (lambda d: d["lossless"]["prompts"].pop(), "[lossless] prompts"),
    "gate_added": (lambda d: d.update(gate={"mode": "off"}), "[gate]"),
    "target_version": (
        lambda d: d["target"].update(version="0.5.99"),
        "[target] version",
    ),
    "file_path": (
        lambda d: d["file"][0].update(path=d["file"][0]["path"] + "x"),
        "[[file]] #1 path",
    ),
    "ported_from": (lambda d: d.update(ported_from="ddtree@0.0.1"), "key 'ported_from'"),
}


def _applies(version: str, case: str) -> bool:
    data = tomllib.loads((DDTREE / version / "patchset.toml").read_text(encoding="utf-8"))
    table = case.split("_")[0]
    needs = {"serve": "serve", "lossless": "lossless", "smoke": "smoke"}.get(table)
    if case == "smoke_after_restart":
        return bool(data.get("smoke", {}).get("after_restart"))
    return needs is None or needs in data


@pytest.mark.parametrize("version", SHIPPED)
def test_every_shipped_version_records_its_spec_and_verifies(version: str) -> None:
    lock = json.loads((DDTREE / version / LOCK).read_text(encoding="utf-8"))
    data = tomllib.loads((DDTREE / version / "patchset.toml").read_text(encoding="utf-8"))
    assert lock["lock_version"] == 2
    assert lock["spec"] == lockable_spec(data)
    assert lock["spec_sha256"] == spec_digest(lock["spec"])
    code, output = patchset_cli(DDTREE.parent, "verify", f"ddtree@{version}")
    assert code == 0 and f"verified ddtree@{version}" in output, output


@pytest.mark.parametrize("version", SHIPPED)
def test_editing_any_table_of_a_shipped_copy_fails_verify(tmp_path: Path, version: str) -> None:
    """Every applicable edit, on its own fresh copy of the version: exit 2 naming it."""
    base = copy_shipped(tmp_path)
    original = (base / "ddtree" / version / "patchset.toml").read_bytes()
    data = tomllib.loads(original.decode())
    tried: set[str] = set()
    for case, (change, named) in EDITS.items():
        if not _applies(version, case):
            continue
        root = base / "ddtree" / version
        (root / "patchset.toml").write_bytes(original)
        edit_toml(root, change)
        code, output = patchset_cli(base, "verify", f"ddtree@{version}")
        assert code == 2, (case, output)
        assert f"{named}" in output and "differs from its lock" in output, (case, output)
        assert "patchset new" in output and "patchset port" in output, (case, output)
        tried.add("ported_from" if case == "ported_from" else case.split("_")[0])
    # every table and top-level key the version has (but its name/version, which name the
    # folder, and description), and an added [gate] and ported_from
    assert tried >= set(data) - {"name", "version", "description"} | {"gate", "ported_from"}


def test_description_comments_and_shared_flags_are_free(tmp_path: Path) -> None:
    """Negative control of the edits above: what changes no push leaves the lock valid."""
    base = copy_shipped(tmp_path)
    root = base / "ddtree" / "1.1.0"
    spec_path = root / "patchset.toml"
    spec_path.write_text(
        "# a comment\n" + spec_path.read_text().replace("DDTree draft", "Edited: DDTree draft")
    )
    check_sources(load_patchset(root))
    own = copy_version(load_patchset(root), tmp_path / "own" / "ddtree" / "1.1.0", own_files=True)
    assert "shared = true" not in (own / "patchset.toml").read_text()
    check_sources(load_patchset(own))  # the flags dropped, the lock unchanged


def test_push_refuses_an_edited_spec_before_any_host(tmp_path: Path) -> None:
    base = copy_shipped(tmp_path)
    edit_toml(base / "ddtree" / "1.1.0", _budget_64)
    inv = tmp_path / "inv.toml"  # a host nobody listens on: the local gate must stop first
    inv.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    common = ("-p", "ddtree@1.1.0", "--patchsets-dir", str(base))
    done = run_cli("push", "-i", str(inv), "--all", *common)
    assert done.returncode == 2, done.stderr
    assert "[serve] args" in done.stderr and '"64"' in done.stderr


def test_a_locked_version_cannot_be_relocked(tmp_path: Path) -> None:
    base = copy_shipped(tmp_path)
    lock_path = base / "ddtree" / "1.1.0" / LOCK
    before = lock_path.read_bytes()
    code, output = patchset_cli(base, "lock", "ddtree@1.1.0")
    assert code == 2 and "already written" in output, output
    assert "patchset new" in output and "patchset lock --force ddtree@1.1.0" in output
    assert lock_path.read_bytes() == before
    edit_toml(base / "ddtree" / "1.1.0", _budget_64)  # even after an edit: still refused
    assert patchset_cli(base, "lock", "ddtree@1.1.0")[0] == 2
    assert lock_path.read_bytes() == before
    code, output = patchset_cli(base, "lock", "--upgrade", "ddtree@1.1.0")
    assert code == 2 and "already records patchset.toml" in output, output
    code, output = patchset_cli(base, "lock", "--force", "ddtree@1.1.0")  # never pushed: ok
    assert code == 0, output
    assert json.loads(lock_path.read_text())["spec"]["serve"]["args"][-1] == "64"


def test_a_legacy_lock_is_refused_until_upgraded(tmp_path: Path) -> None:
    """A version written with the old lock format (another branch's new version): push and
    verify refuse it; `lock --upgrade` adds only the record, then it verifies."""
    base = copy_shipped(tmp_path)
    lock_path = base / "ddtree" / "2.1.2" / LOCK
    legacy = json.loads(lock_path.read_text())
    del legacy["spec"], legacy["spec_sha256"]
    legacy["lock_version"] = 1
    lock_path.write_text(json.dumps(legacy, indent=2, sort_keys=True) + "\n")
    code, output = patchset_cli(base, "verify", "ddtree@2.1.2")
    assert code == 2 and "patchset lock --upgrade ddtree@2.1.2" in output, output
    code, output = patchset_cli(base, "lock", "--upgrade", "ddtree@2.1.2")
    assert code == 0, output
    assert lock_path.read_bytes() == (DDTREE / "2.1.2" / LOCK).read_bytes()
    assert patchset_cli(base, "verify", "ddtree@2.1.2")[0] == 0


def test_upgrade_refuses_sources_that_left_the_lock(tmp_path: Path) -> None:
    base = copy_shipped(tmp_path)
    root = base / "ddtree" / "1.0.0"
    lock_path = root / LOCK
    legacy = json.loads(lock_path.read_text())
    del legacy["spec"], legacy["spec_sha256"]
    lock_path.write_text(json.dumps(legacy))
    edit_toml(root, lambda d: d["file"].pop())
    code, output = patchset_cli(base, "lock", "--upgrade", "ddtree@1.0.0")
    assert code == 2 and "lock lists other files" in output, output


def test_a_new_version_is_locked_with_its_spec(tmp_path: Path) -> None:
    base = make_patchset(tmp_path, version="3.0.0")
    lock = json.loads((base / "ddtree" / "3.0.0" / LOCK).read_text())
    assert lock["lock_version"] == 2 and lock["spec"]["version"] == "3.0.0"
    assert "description" not in lock["spec"]
