"""The controller-only rig's pure parts: bench/standin_agent.py's wire framing (the bundle
line unanswered, one recorded answer per request line, in order; EOF ends it; a request past
the recording is an error), and bench/standin_sshd.py's core split, sshd config and
inventory (which the product's own inventory loader accepts: no duplicate endpoints)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from standin_agent import MORE_REQUESTS_THAN_RECORDED, load_frames, replay  # noqa: E402
from standin_sshd import (  # noqa: E402
    PORTS_PER_SSHD,
    StandinFiles,
    group_ports,
    render_standin_config,
    split_cpus,
    standin_inventory,
)

from ddtree_deploy.agent.host.wire import BEGIN, END  # noqa: E402

FRAMES = [f'{BEGIN}\n{{"n": {i}}}\n{END}\n'.encode() for i in range(3)]


def test_replay_skips_the_bundle_and_answers_each_request_in_order():
    stdin = io.BytesIO(b"BUNDLE\nreq1\nreq2\nreq3\n")
    stdout = io.BytesIO()
    assert replay(FRAMES, stdin, stdout) == 0
    assert stdout.getvalue() == b"".join(FRAMES)


def test_replay_answers_nothing_before_the_first_request():
    stdout = io.BytesIO()
    assert replay(FRAMES, io.BytesIO(b"BUNDLE\n"), stdout) == 0
    assert stdout.getvalue() == b""
    assert replay(FRAMES, io.BytesIO(b""), stdout) == 0


def test_replay_stops_at_eof_midway():
    stdout = io.BytesIO()
    assert replay(FRAMES, io.BytesIO(b"BUNDLE\nreq1\n"), stdout) == 0
    assert stdout.getvalue() == FRAMES[0]


def test_replay_fails_on_a_request_past_the_recording():
    stdin = io.BytesIO(b"BUNDLE\nr1\nr2\nr3\nr4\n")
    assert replay(FRAMES, stdin, io.BytesIO()) == MORE_REQUESTS_THAN_RECORDED


def test_load_frames_reads_the_recording_format():
    assert load_frames('{"frames": ["a\\n", "b"]}') == [b"a\n", b"b"]


def test_split_cpus_keeps_the_lowest_core_for_the_controller():
    assert split_cpus({3, 1, 2}) == ({1}, {2, 3})
    assert split_cpus({0}) is None


def test_group_ports_in_sshd_sized_groups():
    groups = group_ports(list(range(1000)))
    assert [len(g) for g in groups[:-1]] == [PORTS_PER_SSHD] * (len(groups) - 1)
    assert sum(groups, []) == list(range(1000))


def test_standin_config_listens_on_loopback_and_forces_the_replay(tmp_path):
    text = render_standin_config(StandinFiles(tmp_path), [2201, 2202], "/py -S /s.py /f.json")
    assert "ListenAddress 127.0.0.1:2201\nListenAddress 127.0.0.1:2202\n" in text
    assert "ForceCommand /py -S /s.py /f.json\n" in text
    assert f"SetEnv HOME={tmp_path}\n" in text  # root's ~/.bashrc (pyenv init) not read
    assert "PasswordAuthentication no" in text and "PubkeyAuthentication yes" in text


ONE_HOST = """
[defaults]
user = "root"
python = "/srv/venv/bin/python"
identity_file = "{key}"
known_hosts = "{known}"
state_dir = "/var/lib/ddtree-deploy"
gpus = 0

[defaults.service]
kind = "command"
start = "true"
stop = "true"
status = "true"

[hosts.bench-1]
address = "127.0.0.1"
port = 40001
groups = ["bench"]

[hosts.bench-1.service]
health_url = "http://127.0.0.1:30000/health_generate"
"""


def test_standin_inventory_loads_with_one_distinct_endpoint_per_host(tmp_path):
    from ddtree_deploy.inventory import load_inventory

    key, known = tmp_path / "id", tmp_path / "known_hosts"
    key.write_text("not read by the loader\n")
    known.write_text("")
    one = ONE_HOST.format(key=key, known=tmp_path / "elsewhere")
    path = tmp_path / "inv.toml"
    path.write_text(standin_inventory(one, [2201, 2202, 2203], str(known)))
    hosts = load_inventory(path).hosts
    assert sorted(hosts) == ["standin-0001", "standin-0002", "standin-0003"]
    assert [h.port for h in hosts.values()] == [2201, 2202, 2203]
    assert {str(h.known_hosts) for h in hosts.values()} == {str(known)}


@pytest.mark.parametrize("ports", [[2201, 2201]])
def test_standin_inventory_with_a_repeated_port_is_refused_by_the_loader(tmp_path, ports):
    """Negative control: the loader refuses two hosts on one endpoint, which is why each
    stand-in host gets its own port."""
    from ddtree_deploy.errors import DeployError
    from ddtree_deploy.inventory import load_inventory

    path = tmp_path / "inv.toml"
    one = ONE_HOST.format(key=tmp_path / "id", known=tmp_path / "k")
    path.write_text(standin_inventory(one, ports, str(tmp_path / "k")))
    with pytest.raises(DeployError, match="duplicate"):
        load_inventory(path)


def test_free_ports_are_distinct_even_when_picked_in_small_batches():
    from standin_sshd import free_ports

    ports = free_ports(40, held_at_once=7)
    assert len(ports) == len(set(ports)) == 40
