"""The host modules imported directly by the controller's python: the typed records, the
file primitives, dispatch and the flock; and what the bundle must stay (stdlib only,
python 3.8 grammar)."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import sys
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import files, main, wire, wire_bundle
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire_results import Facts, FileFacts, ServeFound
from ddtree_deploy.agent.protocol import agent_version

HOST_DIR = Path(wire.__file__).parent


# --- the typed records --------------------------------------------------------------


def test_args_are_strict_and_name_the_op_and_the_key():
    with pytest.raises(WireError, match=r"op 'prune' args: unknown key 'kep'"):
        wire.parse_args("prune", {"kep": 1})
    with pytest.raises(WireError, match=r"op 'restore' args: missing key 'deploy_id'"):
        wire.parse_args("restore", {})
    with pytest.raises(WireError, match=r"unknown op 'format_disk'"):
        wire.parse_args("format_disk", {})
    bad_file = {
        "site_packages": "/s",
        "files": [{"path": "a", "result_sha256": "x"}, {"path": "b"}],
    }
    with pytest.raises(WireError, match=r"op 'install' args\.files\[1\]: missing key 'result_sha"):
        wire.parse_args("install", bad_file)
    with pytest.raises(WireError, match=r"args\.service: expected an object, got list"):
        wire.parse_args("health", {"service": []})


def test_records_round_trip_and_keep_the_old_json_shape():
    args = wire.parse_args("install", {"site_packages": "/s", "files": [
        {"path": "a.py", "result_sha256": "r", "upgrade_sha256": ["u"], "diff": "d"}]})  # fmt: skip
    assert args.files[0].diff == "d" and args.files[0].base_sha256 is None
    again = wire.InstallArgs.from_dict(json.loads(json.dumps(args.to_dict())))
    assert again == wire.InstallArgs(
        site_packages="/s",
        files=[wire.FileSpec(path="a.py", result_sha256="r", upgrade_sha256=["u"], diff="d")],
    )
    assert "content_b64" not in args.to_dict()["files"][0]  # left out when None
    facts = FileFacts(sha256="s", record_sha256=None)
    assert facts.to_dict() == {"sha256": "s", "record_sha256": None}
    assert ServeFound(path="/p", sha256=None, text=None, error="x").to_dict()["error"] == "x"
    assert set(wire.OP_ARGS) == set(main.OPS)  # every op has its arguments record
    assert wire.Code.NO_CHANGES == "no_changes"
    with pytest.raises(WireError, match="Facts: missing key 'python'"):
        Facts.from_dict({"serve": None})


def test_op_failed_takes_only_known_codes():
    assert wire.OpFailed("drift", "x").code is wire.Code.DRIFT
    with pytest.raises(ValueError):
        wire.OpFailed("no_such_code", "x")


# --- the bundle stays portable ------------------------------------------------------


def _stdlib_names() -> set[str]:
    return set(sys.stdlib_module_names)


@pytest.mark.parametrize("path", sorted(HOST_DIR.glob("*.py")), ids=lambda p: p.name)
def test_host_module_is_python38_grammar_and_stdlib_only(path):
    tree = ast.parse(path.read_text(), str(path), feature_version=(3, 8))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: a sibling in the bundle
                continue
            tops = [(node.module or "").split(".")[0]]
        else:
            continue
        assert all(top in _stdlib_names() for top in tops), (path.name, tops)
    assert len(path.read_text().splitlines()) <= 300, path.name


def test_agent_version_is_the_hash_of_the_bundle_it_was_built_from(monkeypatch):
    sources = wire_bundle.bundle_sources(HOST_DIR)
    assert main.agent_version() == agent_version() == wire_bundle.bundle_hash(sources)
    assert set(sources) == {f"ddtree_agent.{p.stem}" for p in HOST_DIR.glob("*.py")} - {
        "ddtree_agent.__init__"
    }
    changed = dict(sources, **{"ddtree_agent.pure": sources["ddtree_agent.pure"] + "\n"})
    assert wire_bundle.bundle_hash(changed) != wire_bundle.bundle_hash(sources)


# --- files -------------------------------------------------------------------------


def test_write_atomic_sets_the_mode_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "d" / "f"
    files.write_atomic(str(target), b"one", 0o640)
    files.write_atomic(str(target), b"two", 0o600)
    assert target.read_bytes() == b"two" and target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(target.parent) == ["f"]
    files.append_line(str(tmp_path / "j"), {"b": 1, "a": 2})
    assert (tmp_path / "j").read_text() == '{"a": 2, "b": 1}\n'


def test_clear_pycache_removes_only_that_modules_bytecode(tmp_path):
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("mod.cpython-311.pyc", "mod.cpython-38.opt-1.pyc", "model.cpython-311.pyc"):
        (cache / name).write_bytes(b"")
    removed = files.clear_pycache(str(tmp_path / "mod.py"))
    assert sorted(removed) == ["mod.cpython-311.pyc", "mod.cpython-38.opt-1.pyc"]
    assert os.listdir(cache) == ["model.cpython-311.pyc"]
    assert files.clear_pycache(str(tmp_path / "none" / "x.py")) == []


@pytest.mark.parametrize("rel", ["/etc/passwd", "a/../../x", "a\x00b", "out/x"])
def test_safe_join_refuses_paths_that_leave_the_root(tmp_path, rel):
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(wire.OpFailed) as caught:
        files.safe_join(str(root), rel)
    assert caught.value.code == wire.Code.UNSAFE_PATH
    assert files.safe_join(str(root), "in/x.py") == str(root / "in/x.py")
    with pytest.raises(wire.OpFailed):
        files.check_serve_path("relative/serve.env")
    assert files.check_serve_path("/etc/serve.env") == "/etc/serve.env"


# --- dispatch and the flock -----------------------------------------------------------


def request(state_dir, *ops, version=None):
    """A request dict as the controller sends it."""
    return {"agent_version": version or agent_version(), "state_dir": str(state_dir),
            "ops": [{"op": op, "args": args} for op, args in ops]}  # fmt: skip


def test_handle_refuses_another_bundle_and_reports_bad_args_as_data(tmp_path):
    answer = main.handle(request(tmp_path, ("facts", {}), version="0" * 64))
    assert answer == {"ok": False, "results": [], "error": "agent version mismatch"}
    answer = main.handle(request(tmp_path, ("prune", {"kep": 1}), ("facts", {})))
    assert [r["op"] for r in answer["results"]] == ["prune"]  # stops at the failure
    assert answer["results"][0]["code"] == "bad_args"
    assert "op 'prune' args: unknown key 'kep'" in answer["results"][0]["error"]
    answer = main.handle(request(tmp_path, ("check_plan", {"package": "p", "target_version": None,
                                                           "files": []})))  # fmt: skip
    assert answer["results"][0]["code"] == "exception"  # no facts op before it: a bug
    assert "KeyError" in answer["results"][0]["error"]
    assert "ops_plan.py" in answer["results"][0]["data"]["traceback"]


def _hold_flock(path: Path) -> int:
    path.mkdir(exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_busy_state_dir_refuses_changes_and_lock_takeovers(tmp_path, monkeypatch):
    """Another agent holds the flock: a changing request is refused; a preflight still
    runs, takes a free lock, but never replaces an expired one (two preflights after a
    dead run cannot both take it over)."""
    monkeypatch.setattr(main, "QUICK_WAIT_S", 0.1)
    monkeypatch.setattr(main, "EXCLUSIVE_WAIT_S", 0.1)
    state = tmp_path / "state"
    fd = _hold_flock(state)
    try:
        busy = main.handle(request(state, ("prune", {})))
        assert busy["error"] == "another agent is still working here"
        take = ("lock_acquire", {"run_id": "r1", "holder": "me"})
        assert main.handle(request(state, take))["ok"]  # O_EXCL on a free lock: safe
        expired = {"run_id": "dead", "holder": "ghost", "expires_epoch": 0}
        (state / "lock").write_text(json.dumps(expired))
        answer = main.handle(request(state, ("lock_acquire", {"run_id": "r2", "holder": "me"})))
        assert answer["results"][0]["code"] == "locked"
        assert "another agent is still working here" in answer["results"][0]["error"]
        assert json.loads((state / "lock").read_text()) == expired
    finally:
        os.close(fd)
    answer = main.handle(request(state, ("lock_acquire", {"run_id": "r2", "holder": "me"})))
    assert answer["ok"] and answer["results"][0]["data"]["lock"]["replaced"] == expired


def test_record_hashes_reads_the_wanted_rows_of_record_quoted_paths_too(tmp_path):
    """facts' RECORD reading (csv rows, not importlib's PackagePath per row): the wanted
    paths' sha256 as hex, a quoted path holding a comma included, every other row ignored."""
    import base64
    import hashlib
    from importlib.metadata import PathDistribution

    from ddtree_deploy.agent.host.ops_plan import _record_hashes

    def row(path: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        quoted = f'"{path}"' if "," in path else path
        return f"{quoted},sha256={digest},{len(data)}"

    info = tmp_path / "pkg-1.0.dist-info"
    info.mkdir()
    rows = [row("pkg/a.py", b"a"), row("pkg/odd,name.py", b"b"), row("pkg/c.py", b"c"),
            "pkg-1.0.dist-info/RECORD,,"]  # fmt: skip
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    found = _record_hashes(PathDistribution(info), {"pkg/a.py", "pkg/odd,name.py", "pkg/gone.py"})
    assert found == {
        "pkg/a.py": hashlib.sha256(b"a").hexdigest(),
        "pkg/odd,name.py": hashlib.sha256(b"b").hexdigest(),
    }
    assert _record_hashes(None, {"pkg/a.py"}) == {}
