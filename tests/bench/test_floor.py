"""bench/floor.py, the floor of scenario A: the one-exec script does a push's work on a host
(here run by a local `sh`, the host's commands stood in by `true` and a file:// health URL),
refuses a held lock, and stops at a sha256 mismatch; bench/pyinfra_peer.py's inventory."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from floor import FLOOR_EXIT_LOCKED, FloorFile, FloorJob, floor_script  # noqa: E402
from pyinfra_peer import render_inventory  # noqa: E402

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("sh", "base64", "sha256sum", "curl")),
    reason="needs sh, base64, sha256sum and curl",
)


@pytest.fixture
def job(tmp_path: Path) -> FloorJob:
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "old.py").write_text("X = 1\n")
    (tmp_path / "health").write_text("ok\n")
    return FloorJob(
        site=str(site),
        backup_dir=str(tmp_path / "backup"),
        python=sys.executable,
        service_stop="true",
        service_start="true",
        service_status="true",
        health_url=f"file://{tmp_path / 'health'}",
        files=(
            FloorFile("pkg/old.py", b"X = 2\n", existed=True),
            FloorFile("pkg/sub/new.py", b"'''new'''\nY = 'it''s'\n", existed=False),
        ),
    )


def run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-s"], input=script, text=True, capture_output=True)


def test_floor_backs_up_writes_checks_compiles_and_journals(job: FloorJob):
    done = run(floor_script(job))
    assert done.returncode == 0, done.stderr
    site, backup = Path(job.site), Path(job.backup_dir)
    assert (site / "pkg/old.py").read_bytes() == b"X = 2\n"
    assert (site / "pkg/sub/new.py").read_bytes() == job.files[1].data
    assert (backup / "pkg__old.py").read_text() == "X = 1\n"  # the original, backed up
    assert not (backup / "pkg__sub__new.py").exists()  # nothing to back up for a new file
    assert list((site / "pkg/__pycache__").glob("old.*.pyc"))
    assert list((site / "pkg/sub/__pycache__").glob("new.*.pyc"))
    assert '"event":"floor-install"' in (backup / "journal.jsonl").read_text()
    assert not (backup / "lock").exists()  # released


def test_floor_refuses_a_held_lock_and_changes_nothing(job: FloorJob):
    (Path(job.backup_dir) / "lock").mkdir(parents=True)
    done = run(floor_script(job))
    assert done.returncode == FLOOR_EXIT_LOCKED
    assert (Path(job.site) / "pkg/old.py").read_text() == "X = 1\n"


def test_floor_stops_at_a_sha256_mismatch(job: FloorJob):
    script = floor_script(job)
    good = job.files[0]
    import hashlib

    digest = hashlib.sha256(good.data).hexdigest()
    done = run(script.replace(digest, "0" * 64))  # as if the bytes changed on the way
    assert done.returncode != 0
    assert not (Path(job.backup_dir) / "journal.jsonl").exists()  # never got to the journal


def test_floor_fails_when_health_never_answers(job: FloorJob):
    script = floor_script(replace(job, health_url="file:///nonexistent/health"))
    script = script.replace("[ $tries -lt 1200 ]", "[ $tries -lt 2 ]")  # fail fast
    assert run(script).returncode == 9


def test_pyinfra_inventory_is_one_group_with_strict_host_keys():
    text = render_inventory(
        [{"name": "h1", "port": 2201, "health_url": "http://x/h"}], "/k/id", "/k/known"
    )
    ((name, data),) = ast.literal_eval(text.split("=", 1)[1].strip())
    assert text.startswith("bench = ")
    assert name == "h1"
    assert data["ssh_port"] == 2201 and data["ssh_hostname"] == "127.0.0.1"
    assert data["ssh_strict_host_key_checking"] == "yes"
    assert data["ssh_known_hosts_file"] == "/k/known" and data["health_url"] == "http://x/h"
