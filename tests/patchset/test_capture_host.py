"""`patchset new --from-host` on a real sshd host with a pristine sglang 0.5.13.post1, edited
in place OVER SSH into ddtree 1.0.0's results: the captured patchset's lock has ddtree
1.0.0's result hashes, and the host is byte-identical before and after (a read-only capture).
Negative controls: another --target version, a file deleted on the host, an unknown host:
exit 2, one message, nothing written.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import fetch_wheel, materialize
from tests.support import DDTREE_100, run_cli

pytestmark = pytest.mark.hosts
TARGET = "sglang==0.5.13.post1"
# Writes {path: base64} from stdin under the site-packages given as argv[1] (the host's python).
WRITE_FILES = (
    "import base64, json, os, sys\n"
    "for rel, b64 in json.load(sys.stdin).items():\n"
    "    path = os.path.join(sys.argv[1], rel)\n"
    "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
    "    with open(path, 'wb') as fh:\n"
    "        fh.write(base64.b64decode(b64))\n"
)
DELETED = "sglang/srt/speculative/spec_utils.py"  # a wheel file ddtree does not touch


@dataclass
class Edited:
    """The module's one host, hand-edited over SSH into ddtree 1.0.0's results."""

    sandbox: object
    results: dict[str, bytes]

    @property
    def host(self):
        return self.sandbox.hosts[0]

    def ssh(self, command: str, stdin: bytes = b"") -> None:
        """Run `command` on the host over SSH; fail the test when it fails."""
        import subprocess

        argv = self.sandbox.ssh_argv(self.host, command)
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    def new(self, patchsets: Path, ref: str, *args: str):
        """`patchset new REF --from-host host0 ARGS` against this sandbox's inventory."""
        return run_cli(
            "patchset", "new", ref, *args, "-i", str(self.sandbox.inventory_path),
            "--patchsets-dir", str(patchsets),
        )  # fmt: skip

    def digest(self) -> dict[str, str]:
        """sha256 of every sglang file and every state-dir file on the host."""
        state = self.host.tree_digest("", root=self.host.state_dir_on_disk)
        return {**self.host.tree_digest("sglang"), **{f"state/{k}": v for k, v in state.items()}}


@pytest.fixture(scope="module")
def edited(base_env, tmp_path_factory) -> Iterator[Edited]:
    from ddtree_sandbox import start_sandbox

    sandbox = start_sandbox(tmp_path_factory.mktemp("capture"), 1, first_octet=None,
                            base_env=base_env, service="stub")  # fmt: skip
    try:
        patchset = load_patchset(DDTREE_100)
        built = materialize(patchset, fetch_wheel(patchset.spec.target))
        bench = Edited(sandbox, {m.entry.path: m.result for m in built})
        payload = {rel: base64.b64encode(data).decode() for rel, data in bench.results.items()}
        host = bench.host
        command = f"{host.python} -c {shlex.quote(WRITE_FILES)} {host.site_packages}"
        bench.ssh(command, json.dumps(payload).encode())
        yield bench
    finally:
        sandbox.stop()


def result_hashes(patchset_dir: Path) -> dict[str, str]:
    lock = json.loads((patchset_dir / "patchset.lock.json").read_text())
    return {path: f["result_sha256"] for path, f in lock["files"].items()}


def test_a_host_edited_over_ssh_captures_ddtree_100s_result_hashes(edited, tmp_path):
    before = edited.digest()
    done = edited.new(tmp_path, "ddtree@9.0.0", "--target", TARGET, "--from-host", "host0")
    assert done.returncode == 0, done.stderr
    assert result_hashes(tmp_path / "ddtree" / "9.0.0") == result_hashes(DDTREE_100)
    assert edited.digest() == before  # read-only: no file, no lock, no journal changed


def test_another_target_version_than_the_hosts_is_refused(edited, tmp_path):
    done = edited.new(
        tmp_path, "ddtree@9.0.1", "--target", "sglang==0.5.13", "--from-host", "host0"
    )
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert "host0: installed sglang is 0.5.13.post1, --target is sglang==0.5.13" in message
    assert not (tmp_path / "ddtree").exists()


def test_an_unknown_host_is_refused(edited, tmp_path):
    done = edited.new(tmp_path, "ddtree@9.0.2", "--target", TARGET, "--from-host", "nosuch")
    assert done.returncode == 2, done.stderr
    assert "nosuch" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ddtree").exists()


def test_a_file_deleted_on_the_host_is_refused_by_name(edited, tmp_path):
    site = edited.host.site_packages
    saved = (edited.host.site_packages_on_disk / DELETED).read_bytes()
    edited.ssh(f"rm {site}/{DELETED}")
    try:
        done = edited.new(tmp_path, "ddtree@9.0.3", "--target", TARGET, "--from-host", "host0")
    finally:
        payload = json.dumps({DELETED: base64.b64encode(saved).decode()}).encode()
        edited.ssh(f"{edited.host.python} -c {shlex.quote(WRITE_FILES)} {site}", payload)
    assert done.returncode == 2, done.stderr
    assert DELETED in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ddtree").exists()
