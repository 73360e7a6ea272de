"""Crash safety of the agent: a dropped SSH channel mid-install, and the backup check that
comes before the first site-packages write."""

from __future__ import annotations

import time

import pytest

from tests.faults.hostside import SITE, STATE_DIR
from tests.faults.runner import Push, expected_after
from tests.support import make_patchset

pytestmark = pytest.mark.hosts


def _leftover_temp_files(fh) -> list[str]:
    done = fh.host.run(["find", f"{SITE}/sglang", "-name", ".ddtree-*"])
    return done.stdout.split()


def test_cut_mid_install_orphan_finishes_then_the_rollback_restores(fault_host, tmp_path):
    """The agent ignores SIGHUP, so the install it was running completes after the cut; the
    controller's rollback over a new connection waits for it (per-host agent lock) instead of
    restoring first and being overwritten by the orphan a moment later."""
    fh = fault_host
    patchsets = make_patchset(tmp_path, suites=["integrity"])
    fh.start_service()
    before = fh.digest()
    fh.hold_at("install")
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    orphan = fh.wait_paused(push.proc)
    seen = len(push.events)
    assert fh.cut_ssh() > 0
    push.wait_next_request_or_exit(seen)
    assert any(e["stage"] == "rollback" for e in push.events[seen:]), push.events[seen:]
    time.sleep(3)  # let a rollback that does not wait for the orphan finish first
    assert orphan in fh.agents()  # alive after the cut: SIGHUP ignored
    fh.release()
    code, err = push.finish()
    fh.wait_agents_gone()
    assert code == 1, err
    assert "connection lost" in err or "install" in err
    assert fh.digest() == before
    assert [e["state"] for e in fh.journal()] == ["installing", "rolled_back"]
    assert fh.lock() is None and fh.service_running()
    assert _leftover_temp_files(fh) == []


@pytest.mark.slow  # the matrix's install-sigkill cell covers it by default
def test_cut_mid_install_then_sigkill_controller_recover_restores(fault_host, tmp_path):
    """Cut and controller gone: the orphan's install lands whole (never a mixed tree), the
    journal says installing, and `recover` puts the host back."""
    fh = fault_host
    patchsets = make_patchset(tmp_path, suites=["integrity"])
    fh.start_service()
    before = fh.digest()
    fh.hold_at("install")
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    fh.wait_paused(push.proc)
    fh.cut_ssh()
    push.proc.kill()
    push.proc.wait()
    fh.release()
    fh.wait_agents_gone()
    assert fh.digest() == expected_after(before, patchsets)  # all of it, not part
    assert _leftover_temp_files(fh) == []
    assert fh.journal()[-1]["state"] == "installing"
    from tests.support import run_cli

    done = run_cli("recover", "-H", "host0", "-i", str(fh.sandbox.inventory_path))
    assert done.returncode == 0, done.stderr
    assert fh.digest() == before and fh.lock() is None and fh.service_running()


def test_backup_is_verified_before_the_first_site_packages_write(fault_host, tmp_path):
    fh = fault_host
    patchsets = make_patchset(tmp_path, suites=["integrity"])
    before = fh.digest()
    fh.hold_at("install")
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    fh.wait_paused(push.proc)
    copy = f"{STATE_DIR}/backups/*/files/sglang/srt/server_args.py"
    assert fh.host.run(f"for f in {copy}; do echo corrupted >> $f; done").returncode == 0
    fh.release()
    code, err = push.finish()
    assert code == 1, err
    assert "does not match its manifest" in err
    assert fh.digest() == before  # install refused before writing anything
    assert [e["state"] for e in fh.journal()] == ["installing", "rolled_back"]
