"""Patchsets: lock/verify against the real pinned wheel, and bad ones refused (exit 2)."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import (
    check_sources,
    default_patchsets_dir,
    list_patchsets,
    load_patchset,
    parse_patchset,
    resolve_patchset,
    verify_patchset,
)
from tests.support import DDTREE_100, REPO, make_patchset, run_cli, utils_file

PATH = "sglang/srt/speculative/ddtree_utils.py"


def test_shipped_patchset_verifies_against_the_real_wheel():
    lock = verify_patchset(load_patchset(DDTREE_100))
    spec_info = lock.files["sglang/srt/speculative/spec_info.py"]
    assert spec_info.base_sha256 != spec_info.result_sha256
    assert lock.files[PATH].base_sha256 is None  # a new file: absent from the wheel


def test_cli_lock_then_verify(tmp_path):
    dirs = make_patchset(tmp_path, lock=False)
    assert run_cli("patchset", "lock", "ddtree@1.0.0", "--patchsets-dir", str(dirs)).returncode == 0
    done = run_cli("patchset", "verify", "ddtree", "--patchsets-dir", str(dirs))
    assert done.returncode == 0 and "verified ddtree@1.0.0" in done.stderr
    listing = run_cli("patchset", "list", "--patchsets-dir", str(dirs))
    assert "sglang==0.5.13.post1" in listing.stdout and "locked" in listing.stdout  # data
    assert listing.stderr == ""
    rows = [json.loads(line) for line in run_cli("--json", *listing.args[3:]).stdout.splitlines()]
    assert [(r["ref"], r["locked"], r["files"]) for r in rows] == [("ddtree@1.0.0", True, 3)]


def _replace_in_toml(old: str, new: str):
    def mutate(root):
        spec = root / "patchset.toml"
        spec.write_text(spec.read_text().replace(old, new, 1))

    return mutate


def _break_diff_context(root):
    diff = root / "patches" / "spec_info.py.diff"
    lines = diff.read_text().splitlines(keepends=True)
    idx = next(i for i, ln in enumerate(lines) if ln.startswith(" ") and ln.strip())
    lines[idx] = " # a context line that is not in the base file\n"
    diff.write_text("".join(lines))


BAD = {
    "absolute_path": (
        _replace_in_toml(
            'path = "sglang/srt/speculative/ddtree_utils.py"', 'path = "/etc/ddtree_utils.py"'
        ),
        "is absolute",
    ),
    "dotdot_path": (
        _replace_in_toml(
            'path = "sglang/srt/speculative/ddtree_utils.py"', 'path = "sglang/../../evil.py"'
        ),
        "contains '..'",
    ),
    "outside_package": (
        _replace_in_toml(
            'path = "sglang/srt/speculative/ddtree_utils.py"', 'path = "evil/ddtree_utils.py"'
        ),
        "outside the target package",
    ),
    "missing_diff": (
        lambda root: (root / "patches" / "spec_info.py.diff").unlink(),
        "patches/spec_info.py.diff not found",
    ),
    "diff_does_not_apply": (_break_diff_context, "diff does not apply"),
    "wrong_target_version": (
        _replace_in_toml('version = "0.5.13.post1"', 'version = "0.0.0.post99"'),
        "cannot download sglang==0.0.0.post99",
    ),
    "unknown_key": (_replace_in_toml("[target]", 'colour = "red"\n[target]'), "unknown key"),
    "binary_file": (
        lambda root: utils_file(root).write_bytes(b"\x00\xff\xfe binary"),
        "not UTF-8 text",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_patchset_exit_2_clear_message(case, tmp_path):
    mutate, expected = BAD[case]
    dirs = make_patchset(tmp_path, mutate=mutate, lock=False)
    done = run_cli("patchset", "lock", "ddtree@1.0.0", "--patchsets-dir", str(dirs))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    # one error line; only a download the command announced may come before it
    lines = done.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if re.match(r"^error: ", line)]
    assert len(errors) == 1, done.stderr
    assert all(line.startswith("downloading ") for line in lines[: errors[0]]), done.stderr


def test_source_changed_after_lock_is_refused_before_any_host(tmp_path):
    dirs = make_patchset(tmp_path)
    utils = utils_file(dirs / "ddtree" / "1.0.0")
    utils.write_text(utils.read_text() + "\n# edited after locking\n")
    with pytest.raises(PatchsetError, match="changed since the lock was written"):
        check_sources(load_patchset(dirs / "ddtree" / "1.0.0"))
    inv = tmp_path / "inv.toml"  # a host nobody listens on: the gate must stop first
    inv.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    done = run_cli("push", "-i", str(inv), "--all", "--patchsets-dir", str(dirs))
    assert done.returncode == 2 and "changed since the lock was written" in done.stderr


def test_lock_result_mismatch_is_caught_by_verify(tmp_path):
    dirs = make_patchset(tmp_path)
    lock_path = dirs / "ddtree" / "1.0.0" / "patchset.lock.json"
    lock = json.loads(lock_path.read_text())
    lock["files"]["sglang/srt/speculative/spec_info.py"]["result_sha256"] = "0" * 64
    lock_path.write_text(json.dumps(lock))
    done = run_cli("patchset", "verify", "ddtree@1.0.0", "--patchsets-dir", str(dirs))
    assert done.returncode == 2 and "result_sha256 mismatch" in done.stderr


def test_missing_lock_is_refused(tmp_path):
    dirs = make_patchset(tmp_path, lock=False)
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    done = run_cli("push", "-i", str(inv), "--all", "--patchsets-dir", str(dirs))
    assert done.returncode == 2 and "patchset.lock.json: missing" in done.stderr


def test_lossless_references_are_locked_like_the_code(tmp_path):
    """ddtree 1.1.0 ships the lossless gate's references: editing one (a bad reference could
    make the gate pass a lossy build) is refused by the local gate, naming the file."""
    from tests.support import REPO, copy_patchset

    root = tmp_path / "ddtree" / "1.1.0"
    copy_patchset(REPO / "patchsets" / "ddtree" / "1.1.0", root)
    patchset = load_patchset(root)
    lock = check_sources(patchset)
    assert set(lock.references) == set(patchset.spec.lossless.references)
    ref = root / patchset.spec.lossless.references[0]
    data = json.loads(ref.read_text())
    data["outputs"][0]["output_ids"][5] += 1
    ref.write_text(json.dumps(data))
    with pytest.raises(PatchsetError, match=re.escape(f"{ref}: lossless reference changed")):
        check_sources(load_patchset(root))


def test_highest_version_is_picked_by_pep_440_order(tmp_path):
    """`-p ddtree` takes the release over its candidate, and a local hotfix over both."""
    for version in ("1.0.0", "1.0.0-rc1", "1.0.0+hotfix", "0.9.0"):
        patchsets = make_patchset(tmp_path, version=version, lock=False)
    found = [p.spec.version for p in list_patchsets(patchsets)]
    assert found == ["0.9.0", "1.0.0-rc1", "1.0.0", "1.0.0+hotfix"]
    assert resolve_patchset(patchsets, "ddtree").spec.version == "1.0.0+hotfix"


def test_a_version_that_cannot_be_ordered_is_refused(tmp_path):
    spec = tomllib.loads((DDTREE_100 / "patchset.toml").read_text()) | {"version": "1.0.0-foo"}
    with pytest.raises(PatchsetError, match="key 'version'.*not a PEP 440 version"):
        parse_patchset(spec, tmp_path / "ddtree" / "1.0.0-foo" / "patchset.toml")


def test_parse_patchset_names_the_folder_it_should_live_in(tmp_path):
    spec = tomllib.loads((DDTREE_100 / "patchset.toml").read_text())
    with pytest.raises(PatchsetError, match="declares ddtree@1.0.0 but lives in ddtree/9.9.9"):
        parse_patchset(spec, tmp_path / "ddtree" / "9.9.9" / "patchset.toml")


def test_patchsets_dir_comes_from_the_env_then_the_checkout_above_the_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("DDTREE_DEPLOY_PATCHSETS", raising=False)
    nested = REPO / "docs"
    assert default_patchsets_dir(nested) == REPO / "patchsets"
    monkeypatch.setenv("DDTREE_DEPLOY_PATCHSETS", str(tmp_path))
    assert default_patchsets_dir(nested) == tmp_path


def test_no_patchsets_dir_names_all_three_ways(tmp_path, monkeypatch):
    monkeypatch.delenv("DDTREE_DEPLOY_PATCHSETS", raising=False)
    (tmp_path / "patchsets").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    with pytest.raises(PatchsetError) as raised:
        default_patchsets_dir(tmp_path)
    assert all(way in str(raised.value) for way in ("--patchsets-dir", "DDTREE_DEPLOY_PATCHSETS"))
    assert "ddtree-deploy checkout" in str(raised.value)
    done = run_cli("patchset", "list", env={"DDTREE_DEPLOY_PATCHSETS": ""}, cwd=tmp_path)
    assert done.returncode == 2 and "--patchsets-dir" in done.stderr
