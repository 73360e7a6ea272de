"""Bad input corpus: each case is one clear message, exit 2, and provably no remote write
(the host's state dir and site-packages hash the same before and after).

Loader-level cases live in tests/inventory and tests/patchset; here every case goes through
the real CLI against a real sshd host that a good run would change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, make_patchset, utils_file

pytestmark = pytest.mark.hosts
SPEC_INFO = "sglang/srt/speculative/spec_info.py"


@dataclass
class Bench:
    """What a case may break: copies of the inventory, known_hosts and the patchset."""

    sandbox: object
    inventory: Path
    patchsets: Path
    tmp: Path

    @property
    def patchset_root(self) -> Path:
        return self.patchsets / "ddtree" / "1.0.0"

    def edit_inventory(self, old: str, new: str) -> None:
        text = self.inventory.read_text()
        assert old in text, old
        self.inventory.write_text(text.replace(old, new, 1))

    def edit_lock(self, fn: Callable[[dict], None]) -> None:
        path = self.patchset_root / "patchset.lock.json"
        lock = json.loads(path.read_text())
        fn(lock)
        path.write_text(json.dumps(lock))


def _known_hosts(bench: Bench, lines: list[str]) -> None:
    path = bench.tmp / "known_hosts"
    path.write_text("".join(line + "\n" for line in lines))
    bench.edit_inventory(f'known_hosts = "{bench.sandbox.known_hosts}"', f'known_hosts = "{path}"')


def _changed_key(bench: Bench) -> None:
    key = bench.tmp / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    other = key.with_suffix(".pub").read_text().split()[:2]
    host_field = bench.sandbox.known_hosts.read_text().split()[0]
    _known_hosts(bench, [" ".join([host_field, *other])])


def _wrong_sglang(bench: Bench) -> None:
    host = bench.sandbox.hosts[0]
    done = host.run(
        "sed -i 's/^Version: 0.5.13.post1$/Version: 0.5.12/' "
        "/srv/venv/lib/python3.11/site-packages/sglang-0.5.13.post1.dist-info/METADATA"
    )
    assert done.returncode == 0, done.stderr


def _drift(bench: Bench) -> None:
    target = bench.sandbox.hosts[0].site_packages_on_disk / SPEC_INFO
    target.write_text(target.read_text() + "\n# local hotfix\n")


def _append_to_utils(data: bytes) -> Callable[[Bench], None]:
    def mutate(bench: Bench) -> None:
        path = utils_file(bench.patchset_root)
        path.write_bytes(path.read_bytes() + data)

    return mutate


def _diff_edit(bench: Bench) -> None:
    diff = bench.patchset_root / "patches" / "spec_info.py.diff"
    diff.write_text(diff.read_text().replace("\n+", "\n+# not what was locked\n+", 1))


def _tampered_shared_blob(bench: Bench) -> None:
    """Keep ddtree_utils.py in the name's store (shared, as the real versions do), then edit
    the blob: the push must refuse it before any host is written."""
    from ddtree_deploy.patchset import apply_dedupe, load_patchset, plan_dedupe
    from ddtree_deploy.patchset.store import put_blob

    blob = put_blob(bench.patchset_root, utils_file(bench.patchset_root).read_bytes())
    versions = [load_patchset(bench.patchset_root)]
    apply_dedupe(versions, plan_dedupe(versions))  # the stored file is now shared
    assert utils_file(bench.patchset_root) == blob
    blob.write_bytes(blob.read_bytes() + b"\n# edited in the store\n")


def _utf8_error_inventory(bench: Bench) -> None:
    bench.inventory.write_bytes(bench.inventory.read_bytes() + b"\n# caf\xe9 \xff\n")


def _toml(edit: tuple[str, str]) -> Callable[[Bench], None]:
    return lambda bench: bench.edit_inventory(*edit)


# id: (setup, extra CLI args (default: push -H host0), expected text on stderr)
CASES: dict[str, tuple[Callable[[Bench], None] | None, list[str] | None, str]] = {
    "inventory_unknown_key": (
        _toml(("[hosts.host0]\n", '[hosts.host0]\nadress = "x"\n')),
        None,
        "unknown key 'adress'",
    ),
    "inventory_bad_port": (_toml(("port = 2222", "port = 70000")), None, "key 'port'"),
    "inventory_toml_syntax": (_toml(("[hosts.host0]", "[hosts.host0")), None, "TOML syntax"),
    "inventory_relative_python": (
        _toml(('python = "/srv/venv/bin/python"', 'python = "bin/python"')),
        None,
        "key 'python'",
    ),
    "inventory_python_not_on_host": (
        _toml(('python = "/srv/venv/bin/python"', 'python = "/srv/venv/bin/no-such-python"')),
        None,
        "key 'python'",
    ),
    "inventory_bad_health_url": (
        _toml(('health_url = "http://', 'health_url = "ftp://')),
        None,
        "health_url must be http",
    ),
    "inventory_nul_in_state_dir": (
        _toml(('state_dir = "/var/lib/ddtree-deploy"', 'state_dir = "/var/lib/x\\u0000y"')),
        None,
        "must not contain NUL",
    ),
    "inventory_not_utf8": (_utf8_error_inventory, None, "not UTF-8"),
    "inventory_unsplittable_command": (
        _toml(('stop = "', "stop = \"'unclosed ")),
        None,
        "cannot split command",
    ),
    "inventory_missing_file": (
        None,
        ["push", "-H", "host0", "-i", "/nonexistent.toml"],
        "inventory file not found",
    ),  # fmt: skip
    "unknown_host": (None, ["push", "-H", "nope"], "unknown host 'nope'"),
    "unknown_group": (None, ["push", "-g", "nope"], "unknown group 'nope'"),
    "no_target": (None, ["push"], "no target"),
    "limit_matches_nothing": (None, ["push", "--all", "--limit", "zz*"], "matches no host"),
    "non_utf8_host_name": (None, ["push", "-H", "h\udcff"], "unknown host"),
    "unknown_option": (None, ["push", "-H", "host0", "--frobnicate"], "No such option"),
    "keep_backups_zero": (None, ["push", "-H", "host0", "--keep-backups", "0"], "keep-backups"),
    "bad_shard": (None, ["push", "-H", "host0", "--shard", "3/2"], "shard"),
    "bad_batch": (None, ["push", "-H", "host0", "--batch", "lots"], "batch"),
    "bad_max_fail": (None, ["push", "-H", "host0", "--max-fail", "-1"], "max-fail"),
    "unknown_patchset": (None, ["push", "-H", "host0", "-p", "nosuch"], "nosuch"),
    "unknown_patchset_version": (None, ["push", "-H", "host0", "-p", "ddtree@9.9.9"], "9.9.9"),
    "patchset_version_is_a_path": (
        None,
        ["push", "-H", "host0", "-p", "ddtree@../ddtree/1.0.0"],
        "is not a version",
    ),  # fmt: skip
    "patchset_lock_missing": (
        lambda b: (b.patchset_root / "patchset.lock.json").unlink(),
        None,
        "lock.json: missing",
    ),
    "patchset_lock_not_json": (
        lambda b: (b.patchset_root / "patchset.lock.json").write_text("{"),
        None,
        "unreadable lock",
    ),
    "patchset_lock_other_files": (
        lambda b: b.edit_lock(lambda lock: lock["files"].pop(SPEC_INFO)),
        None,
        "other files",
    ),
    "patchset_lock_result_forged": (
        lambda b: b.edit_lock(
            lambda lock: lock["files"]["sglang/srt/speculative/ddtree_utils.py"].update(
                result_sha256="0" * 64
            )
        ),
        None,
        "result",
    ),
    "patchset_source_changed": (_append_to_utils(b"\n# edited\n"), None, "changed since the lock"),
    "diff_changed_after_lock": (_diff_edit, None, "changed since the lock"),
    "patchset_shared_blob_tampered": (_tampered_shared_blob, None, "tampered store"),
    "patchset_binary_file": (_append_to_utils(b"\x00\xff\xfe"), None, "not UTF-8 text"),
    "patchset_oversized_file": (_append_to_utils(b"# pad\n" * 400_000), None, "byte limit"),
    "patchset_toml_not_utf8": (
        lambda b: (b.patchset_root / "patchset.toml").write_bytes(
            (b.patchset_root / "patchset.toml").read_bytes() + b"\n# \xff\n"
        ),
        None,
        "cannot parse",
    ),
    "wrong_sglang_version": (
        _wrong_sglang,
        ["push", "-H", "host0", "-p", "ddtree@1.0.0"],
        "0.5.12",
    ),  # fmt: skip
    "unknown_host_key": (lambda b: _known_hosts(b, []), None, "unknown host key"),
    "changed_host_key": (_changed_key, None, "host key CHANGED"),
    "drifted_base_file": (_drift, None, "base files differ from the lock"),
}
PATCHSET_ARGS = ("push", "plan")


def _state_digest(host) -> dict[str, str]:
    """sha256 of every file under the host's state dir and of its site-packages/sglang."""
    digests = {f"site/{k}": v for k, v in host.tree_digest().items()}
    top = host.state_dir_on_disk
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            path = Path(dirpath) / name
            digests[f"state/{path.relative_to(top)}"] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
    return digests


@pytest.fixture(scope="module")
def corpus_sandbox(base_env, tmp_path_factory):
    from ddtree_sandbox import start_sandbox

    sandbox = start_sandbox(tmp_path_factory.mktemp("corpus"), 1, first_octet=None,
                            base_env=base_env, service="stub")  # fmt: skip
    yield sandbox
    sandbox.stop()


# The cases that reach the host: run again through a `become` login (below).
HOST_CASES = ("wrong_sglang_version", "unknown_host_key", "changed_host_key", "drifted_base_file")


@pytest.fixture(scope="module")
def become_corpus_sandbox(base_env):
    """host0 reached as the unprivileged login user; the agent runs as root via sudo -n."""
    from tests.targets.become_sandbox import LOGIN_USER, start_become_sandbox

    rules = {"host0": f"{LOGIN_USER} ALL=(root) NOPASSWD: /srv/venv/bin/python\n"}
    yield from start_become_sandbox(base_env, rules)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exit_2_one_message_no_remote_write(case, corpus_sandbox, tmp_path):
    inventory = tmp_path / "inventory.toml"
    shutil.copyfile(corpus_sandbox.inventory_path, inventory)
    _run_case(case, corpus_sandbox, inventory, tmp_path)


@pytest.mark.parametrize("case", HOST_CASES)
def test_bad_input_through_become_exit_2_no_remote_write(case, become_corpus_sandbox, tmp_path):
    """The same as root's: sudo between sshd and the agent changes no message and no file."""
    from tests.targets.become_sandbox import write_become_inventory

    inventory = tmp_path / "inventory.toml"
    write_become_inventory(become_corpus_sandbox, inventory, {"host0": {"become": "sudo"}})
    _run_case(case, become_corpus_sandbox, inventory, tmp_path)


def _run_case(case: str, sandbox, inventory: Path, tmp_path: Path) -> None:
    """Set the case up on a copy of the inventory and patchset, run the CLI: exit 2, the
    expected text, at most one error line, the host's state dir and tree unchanged."""
    setup, argv, expected = CASES[case]
    bench = Bench(sandbox, inventory, make_patchset(tmp_path, suites=["integrity"]), tmp_path)
    host = sandbox.hosts[0]
    saved_metadata = host.run("cat /srv/venv/lib/python3.11/site-packages/"
                              "sglang-0.5.13.post1.dist-info/METADATA").stdout  # fmt: skip
    spec_info = host.site_packages_on_disk / SPEC_INFO
    original = spec_info.read_bytes()
    try:
        if setup:
            setup(bench)
        before = _state_digest(host)
        args = list(argv or ["push", "-H", "host0"])
        if "-i" not in args:
            args += ["-i", str(inventory)]
        if args[0] in PATCHSET_ARGS:
            args += ["--patchsets-dir", str(bench.patchsets)]
        done = subprocess.run(
            [sys.executable, "-m", "ddtree_deploy", *args],
            capture_output=True, cwd=REPO, timeout=120,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        err = done.stderr.decode(errors="replace")
        assert done.returncode == 2, err
        assert expected in err, err
        assert "Traceback" not in err
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(errors) <= 1, err
        assert _state_digest(host) == before
    finally:
        spec_info.write_bytes(original)
        if saved_metadata:
            path = host.site_packages_on_disk / "sglang-0.5.13.post1.dist-info" / "METADATA"
            path.write_text(saved_metadata)
