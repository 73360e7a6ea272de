"""Bad container settings on a real sshd host with real Docker containers: each is
exit 2 with one message naming the host and the container, and nothing changed (the host's
/srv, the container's writable layer and every state dir hash the same before and after)."""

from __future__ import annotations

import pytest

from ddtree_sandbox.containers import tree_sha256
from tests.containers.conftest import Bench, container_inventory
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts

# case: (inventory keys of host c0, what the one error says besides the host name)
CASES = {
    "unknown_container": ({"container": "nosuch"}, "no container 'nosuch' on the host"),
    "no_python_in_container": (
        {"python": "/opt/nope/bin/python3"},
        "cannot start the agent's python /opt/nope/bin/python3 in container 'sg0'",
    ),
    "runtime_not_installed": (
        {"container_runtime": "podman"},
        "container runtime 'podman' not found on the host",
    ),
    "no_host_python": (
        {"host_python": "/opt/nope/python3"},
        "/opt/nope/python3",
    ),
    "container_service_without_container": (
        {"container": None},
        "service kind = 'container' needs the host's 'container'",
    ),
    "container_name_is_an_option": ({"container": "--privileged"}, "container"),
}


def digest(bench: Bench) -> dict[str, str]:
    """Every file that a run could change: the host's /srv (the image's source), the
    containers' writable layers, the host's state dirs."""
    host = bench.host
    found = {f"srv/{k}": v for k, v in tree_sha256(host.hostdir / "srv").items()}
    for name in ("sg0", "sg1"):
        layer = tree_sha256(bench.containers.upper_dir(name))
        found |= {f"{name}/{k}": v for k, v in layer.items() if k.endswith(".py")}
    found |= {f"state/{k}": v for k, v in tree_sha256(host.state_dir_on_disk).items()}
    return found


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", ["push", "hosts check"])
def test_bad_container_setting_exit_2_nothing_changed(bench, tmp_path, case, command):
    keys, expected = CASES[case]
    overrides = {k: v for k, v in keys.items() if v is not None}
    inventory = container_inventory(bench.sandbox, tmp_path / "inventory.toml", c0=overrides)
    if keys.get("container", "") is None:  # drop the key itself
        text = inventory.read_text().replace('container = "sg0"\n', "", 1)
        inventory.write_text(text)
    args = command.split() + ["-H", "c0", "-i", str(inventory)]
    if command == "push":
        patchsets = make_patchset(tmp_path, suites=["integrity"])
        args += ["-p", "ddtree@1.0.0", "--patchsets-dir", str(patchsets)]
    before = digest(bench)
    done = run_cli(*args, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    err = " ".join(done.stderr.split())  # the table may fold a long message
    assert expected in err, done.stderr
    assert "c0" in err
    assert "Traceback" not in done.stderr
    assert digest(bench) == before


def test_a_good_push_changes_the_digest(bench, tmp_path):
    """Negative control for the digests above: the same push with the good inventory
    succeeds and changes them (the container's writable layer), then is rolled back."""
    before = digest(bench)
    patchsets = make_patchset(tmp_path, suites=["integrity"])
    inventory = str(bench.inventory)
    args = ["-H", "c1", "-i", inventory, "--patchsets-dir", str(patchsets), "--no-restart"]
    done = run_cli("push", "-p", "ddtree@1.0.0", *args, timeout=120)
    assert done.returncode == 0, done.stderr
    assert digest(bench) != before
    assert run_cli("rollback", "-H", "c1", "-i", inventory, timeout=120).returncode == 0
