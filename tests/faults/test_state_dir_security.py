"""A state dir another user can write, and junk on a host's stdout, on real sshd hosts.

- A state dir (or a dir above it, or a file in it) another user owns or can write, or a
  link, is refused: exit 2 naming the path and its owner, nothing changed on the host.
- Modules planted in the state dir are never imported by the smoke suites (which run as
  root): they run `python -I -B` from a fresh private dir.
- A forged journal + backup manifest (outside the package root, a setuid mode, a path out,
  another serve file) makes `recover` refuse (exit 2): no file written, no set-id bit.
- A host whose python prints text without a newline at every start (a .pth) still passes
  its suites (results travel in a file); a suite that gives no result quotes stdout's tail.

Negative controls (run by hand, docs/reliability.md says how): smoke run as before (from
STATE/smoke, not isolated, results on stdout) imports the planted json.py and fails on the
junk; `recover` without restore_check writes the forged file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from ddtree_sandbox.users import ensure_login_user
from tests.faults.hostside import SERVICE, SITE, STATE_DIR
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts
OTHER = "ddtree-mallory"  # the local user who must not get root through the state dir


@pytest.fixture(scope="module")
def other_uid() -> int:
    return ensure_login_user(OTHER)


def _cli(sandbox, *args, patchsets=None):
    extra = ["-i", str(sandbox.inventory_path)]
    if patchsets is not None:
        extra += ["--patchsets-dir", str(patchsets)]
    return run_cli(*args, *extra)


def _listing(top: Path) -> list[tuple[str, int, int, str]]:
    """Every path under `top` with its owner, mode and bytes' hash (links: their target)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in sorted(dirnames) + sorted(filenames):
            path = Path(dirpath, name)
            st = path.lstat()
            body = os.readlink(path) if path.is_symlink() else ""
            if path.is_file() and not path.is_symlink():
                body = str(hash(path.read_bytes()))
            found.append((str(path.relative_to(top)), st.st_uid, st.st_mode, body))
    return sorted(found)


def _set_state_dir(sandbox, path: str) -> None:
    inv = sandbox.inventory_path
    text = inv.read_text()
    assert f'"{STATE_DIR}"' in text
    inv.write_text(text.replace(f'"{STATE_DIR}"', f'"{path}"'))


# (case, shell run on the host as root, state dir for the inventory, words stderr must hold)
CASES = [
    ("owned", f"chown {OTHER} {STATE_DIR}", STATE_DIR,
     f"refusing state dir {STATE_DIR}: owned by uid {{uid}} ({OTHER})"),
    ("group-writable", f"chmod 0770 {STATE_DIR}", STATE_DIR,
     f"refusing state dir {STATE_DIR}: writable by its group (mode 0770)"),
    ("world-writable", f"chmod 0777 {STATE_DIR}", STATE_DIR,
     f"refusing state dir {STATE_DIR}: writable by group and others (mode 0777)"),
    ("parent", f"mkdir -m 0755 {SERVICE}/m && chown {OTHER} {SERVICE}/m && "
               f"mkdir -m 0700 {SERVICE}/m/state", f"{SERVICE}/m/state",
     f"refusing state dir {SERVICE}/m/state: {SERVICE}/m is owned by uid {{uid}} ({OTHER})"),
    ("linked-dir", f"ln -s {STATE_DIR} {SERVICE}/state-link", f"{SERVICE}/state-link",
     f"{SERVICE}/state-link is a symbolic link"),
    ("journal", f"echo '{{}}' > {STATE_DIR}/journal.jsonl && "
                f"chown {OTHER} {STATE_DIR}/journal.jsonl", STATE_DIR,
     f"refusing {STATE_DIR}/journal.jsonl: owned by uid {{uid}} ({OTHER})"),
    ("linked-journal", f"ln -s /etc/hostname {STATE_DIR}/journal.jsonl", STATE_DIR,
     f"refusing {STATE_DIR}/journal.jsonl: a symbolic link"),
]  # fmt: skip


# `make test` runs the first of each kind; `make faults` runs them all.
DEFAULT_CASES = {"owned", "journal", "setuid"}


def _params(cases: list[tuple]) -> list:
    return [
        pytest.param(*c, id=c[0], marks=[] if c[0] in DEFAULT_CASES else [pytest.mark.slow])
        for c in cases
    ]


@pytest.mark.parametrize(("case", "script", "state_dir", "says"), _params(CASES))
def test_a_state_dir_others_could_write_is_refused_naming_path_and_owner(
    sandbox_factory, tmp_path, other_uid, case, script, state_dir, says
):
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    assert host.run(f"mkdir -p {STATE_DIR} && chmod 0700 {STATE_DIR}").returncode == 0
    assert host.run(script).returncode == 0, script
    _set_state_dir(sandbox, state_dir)
    tree, state = host.tree_digest(), _listing(host.state_dir_on_disk)
    service = _listing(host.service_dir_on_disk)
    fast = make_patchset(tmp_path, suites=["integrity"])
    for args in (["push", "-H", "host0"], ["recover", "-H", "host0"],
                 ["rollback", "-H", "host0"], ["status", "-H", "host0"]):  # fmt: skip
        done = _cli(sandbox, *args, patchsets=fast if args[0] == "push" else None)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert says.format(uid=other_uid) in " ".join(done.stderr.split()), (args, done.stderr)
    assert host.tree_digest() == tree
    assert _listing(host.state_dir_on_disk) == state
    assert _listing(host.service_dir_on_disk) == service


PLANTED = """import os
open("{marker}", "w").write("imported as uid %d" % os.geteuid())
raise ImportError("planted {name} imported")
"""


def test_modules_planted_in_the_state_dir_are_never_imported_by_smoke(sandbox_factory, tmp_path):
    """json.py and sitecustomize.py (root's own files, so the state dir is accepted) in
    STATE/smoke, where suites used to run, and in STATE: the push passes and no planted
    module ran."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    markers = []
    for where in (f"{STATE_DIR}/smoke", STATE_DIR):
        for name in ("json", "sitecustomize", "_suite"):
            marker = f"{SERVICE}/planted-{name}-{len(markers)}"
            markers.append(marker)
            body = PLANTED.format(marker=marker, name=name)
            script = f"mkdir -p -m 0700 {where} && cat > {where}/{name}.py <<'EOF'\n{body}EOF\n"
            assert host.run(script + f"chmod 0600 {where}/{name}.py").returncode == 0
    fast = make_patchset(tmp_path, suites=["integrity", "compile"])
    done = _cli(sandbox, "push", "-H", "host0", "--no-restart", patchsets=fast)
    assert done.returncode == 0, done.stderr
    assert host.run(["ls", *markers]).returncode != 0  # ls fails: none exists
    leftovers = sorted(p.name for p in host.state_dir_on_disk.iterdir())
    assert not [name for name in leftovers if name.startswith("smoke-")], leftovers


def _forge(host, site: str, rel: str, mode: int, serve: dict | None = None) -> str:
    """A journal saying deploy d-forged is `installing` and its backup: `rel` under `site`
    with `mode`, owned by root (the state dir's owner: only the manifest check stands)."""
    payload = b"#!/bin/sh\nid > /tmp/forged-ran\n"
    manifest = {
        "deploy_id": "d-forged", "created": "2026-01-01T00:00:00+00:00",
        "site_packages": site, "patchset": "ddtree@1.0.0",
        "files": {rel: {"existed": True, "sha256": hashlib.sha256(payload).hexdigest(),
                        "mode": mode, "uid": 0, "gid": 0}},
    }  # fmt: skip
    if serve:
        manifest["serve"] = dict(serve, sha256=hashlib.sha256(payload).hexdigest())
    backup = host.state_dir_on_disk / "backups" / "d-forged"
    (backup / "files" / rel).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    (backup / "files" / rel).write_bytes(payload)
    (backup / "manifest.json").write_text(json.dumps(manifest))
    if serve:
        (backup / "serve").write_bytes(payload)
    journal = host.state_dir_on_disk / "journal.jsonl"
    entry = {"deploy_id": "d-forged", "state": "installing", "run_id": "r-dead"}
    journal.write_text(json.dumps(entry) + "\n")
    for path in [host.state_dir_on_disk, *host.state_dir_on_disk.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    return payload.decode()


FORGED = [
    ("outside", f"{SERVICE}/rootonly", "evil", 0o755, None, "its site_packages"),
    ("setuid", SITE, "sglang/evil", 0o4755, None, "mode 4755 (only permission bits"),
    ("setgid", SITE, "sglang/evil", 0o2755, None, "mode 2755 (only permission bits"),
    ("traversal", SITE, "../../../../../srv/service/rootonly/evil", 0o755, None, "refusing path"),
    ("serve", SITE, "sglang/evil", 0o644,
     {"path": f"{SERVICE}/rootonly/evil.env", "existed": True, "mode": 0o644, "uid": 0,
      "gid": 0}, "its serve file"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "site", "rel", "mode", "serve", "says"), _params(FORGED))
def test_recover_refuses_a_forged_manifest_and_writes_nothing(
    sandbox_factory, case, site, rel, mode, serve, says
):
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    assert host.run(f"mkdir -m 0700 {SERVICE}/rootonly").returncode == 0
    _forge(host, site, rel, mode, serve)
    tree, service = host.tree_digest(), _listing(host.service_dir_on_disk)
    done = _cli(sandbox, "recover", "-H", "host0")
    assert done.returncode == 2, (done.stdout, done.stderr)
    said = " ".join(done.stderr.split())
    assert "backup d-forged refused" in said and says in said, done.stderr
    assert host.tree_digest() == tree
    assert _listing(host.service_dir_on_disk) == service
    assert not (host.service_dir_on_disk / "rootonly" / "evil").exists()
    assert not (host.site_packages_on_disk / "sglang" / "evil").exists()
    setids = host.run(f"find {SITE} {SERVICE} -perm /6000 -print").stdout.split()
    assert setids == [], setids
    assert not (host.state_dir_on_disk / "lock").exists()  # released after the refusal


@pytest.mark.slow
def test_install_and_restore_write_no_set_id_or_world_writable_bit(sandbox_factory, tmp_path):
    """A patched file that is setuid and world-writable on the host (a trap, or a mistake)
    is written 0755 by the push and by its rollback: never a set-id or o+w bit."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    target = f"{SITE}/sglang/srt/speculative/spec_info.py"
    assert host.run(f"chmod 4777 {target}").returncode == 0
    fast = make_patchset(tmp_path, suites=["integrity"])
    done = _cli(sandbox, "push", "-H", "host0", "--no-restart", patchsets=fast)
    assert done.returncode == 0, done.stderr
    path = host.site_packages_on_disk / "sglang/srt/speculative/spec_info.py"
    assert stat.S_IMODE(path.stat().st_mode) == 0o775
    back = _cli(sandbox, "rollback", "-H", "host0", "--no-restart")
    assert back.returncode == 0, back.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o775


JUNK_PTH = "zz_ddtree_junk.pth"


def _junk_pth(host, body: str) -> None:
    script = f"cat > {SITE}/{JUNK_PTH} <<'EOF'\n{body}\nEOF\n"
    assert host.run(script).returncode == 0
    probe = host.run(["/srv/venv/bin/python", "-I", "-c", "pass"])
    assert probe.stdout.startswith("BANNER"), probe  # every start prints it, no newline


def test_junk_on_the_hosts_stdout_leaves_every_suite_passing(sandbox_factory, tmp_path):
    """A .pth in the host's site-packages writes text without a newline at every python
    start: the agent's answer and every suite's result still come through."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    banner = "import sys; sys.stdout.write('BANNER: welcome {\"x\": 1}'); sys.stdout.flush()"
    _junk_pth(host, banner)
    fast = make_patchset(tmp_path, suites=["integrity", "imports", "compile"])
    done = _cli(sandbox, "push", "-H", "host0", "--no-restart", patchsets=fast)
    assert done.returncode == 0, done.stderr
    smoke = _cli(sandbox, "smoke", "-H", "host0", patchsets=fast)
    assert smoke.returncode == 0, smoke.stderr


def test_a_suite_that_gives_no_result_quotes_the_stdout_tail(sandbox_factory, tmp_path):
    """The same junk, and every suite's python then exits before it has a result (exit 7):
    the push rolls back and its message quotes what stdout said (control characters
    escaped)."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    tree = host.tree_digest()
    _junk_pth(host, "import os, sys; sys.stdout.write('BANNER: \\x1b[31mred'); sys.stdout.flush()"
              "; os.environ.get('DDTREE_SMOKE_RESULT') and os._exit(7)")  # fmt: skip
    fast = make_patchset(tmp_path, suites=["integrity"])
    done = _cli(sandbox, "push", "-H", "host0", "--no-restart", patchsets=fast)
    assert done.returncode == 1, done.stderr
    said = " ".join(done.stderr.split())
    assert "integrity: no result (exit 7); stdout: BANNER: \\x1b[31mred" in said, done.stderr
    assert host.tree_digest() == tree
