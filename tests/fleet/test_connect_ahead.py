"""Connections opened ahead (fleet/ahead.py): the CLI opens the first hosts' SSH routes
while it loads the rest, the fleet takes them, and a failed one is reported once, as the
host's own first request would have reported it. Real sshd hosts."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.agent import AgentRequest, Op
from ddtree_deploy.cli import app
from ddtree_deploy.errors import ConnectError
from ddtree_deploy.fleet import ahead
from ddtree_deploy.inventory import load_inventory
from ddtree_deploy.transport import ssh
from tests.support import make_patchset

pytestmark = pytest.mark.hosts


@pytest.fixture
def routes_opened(monkeypatch) -> list[str]:
    """The thread that opened each SSH route (the real `open_route`, counted)."""
    threads: list[str] = []
    real = ssh.open_route

    def counted(host_name, hops):
        threads.append(threading.current_thread().name)
        return real(host_name, hops)

    monkeypatch.setattr(ssh, "open_route", counted)
    return threads


def _facts(host) -> AgentRequest:
    return AgentRequest(state_dir=host.state_dir, ops=[Op(op="facts", args={"paths": []})])


def test_a_push_takes_the_connections_opened_ahead(sandbox_factory, tmp_path, monkeypatch,
                                                   routes_opened):  # fmt: skip
    sandbox = sandbox_factory(2)
    taken: dict[str, object] = {}
    real_take = ahead.take

    def recording_take(host):
        taken[host.name] = transport = real_take(host)
        return transport

    monkeypatch.setattr(ahead, "take", recording_take)
    patchsets = str(make_patchset(tmp_path, suites=[]))
    args = ["push", "--all", "-i", str(sandbox.inventory_path), "--patchsets-dir", patchsets]
    pushed = CliRunner().invoke(app, [*args, "--yes"])
    assert pushed.exit_code == 0, pushed.output
    assert sorted(taken) == ["host0", "host1"]
    assert all(transport is not None for transport in taken.values())  # opened ahead
    assert all(name.startswith("connect host") for name in routes_opened)  # in the background
    assert len(routes_opened) == 2  # one connection per host, none opened twice


def test_a_refused_push_opens_no_connection(sandbox_factory, tmp_path, routes_opened):
    """Bad input (a patchset version that does not exist, a bad --batch) ends the push
    before any host is contacted, connections ahead included."""
    sandbox = sandbox_factory(1)
    patchsets = str(make_patchset(tmp_path, suites=[]))
    base = ["push", "--all", "-i", str(sandbox.inventory_path), "--patchsets-dir", patchsets]
    runner = CliRunner()
    bad = runner.invoke(app, [*base, "-p", "ddtree@9.9.9", "--yes"])
    assert bad.exit_code == 2, bad.output
    batch = runner.invoke(app, [*base, "--batch", "two", "--yes"])
    assert batch.exit_code == 2, batch.output
    assert routes_opened == []
    assert ahead._opened == {}
    # Control: the same push, confirmed, does connect.
    confirmed = runner.invoke(app, [*base, "--yes"])
    assert confirmed.exit_code == 0, confirmed.output
    assert routes_opened == ["connect host0"]


def _closed_port() -> int:
    """A local TCP port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_failed_connection_is_raised_once_by_the_first_request(sandbox_factory,
                                                                routes_opened):  # fmt: skip
    sandbox = sandbox_factory(1)
    host = load_inventory(sandbox.inventory_path).hosts["host0"]
    dead = host.model_copy(update={"port": _closed_port()})
    ahead.connect_ahead([dead])
    transport = ahead.take(dead)
    assert transport is not None and ahead.take(dead) is None  # handed out once
    with pytest.raises(ConnectError) as first:
        transport.call(_facts(dead))
    assert first.value.host == "host0"
    assert routes_opened == ["connect host0"]  # the attempt made ahead, not a second one
    with pytest.raises(ConnectError):  # a later request tries again, as without ahead
        transport.call(_facts(dead))
    assert len(routes_opened) == 2
    transport.close()


def test_a_transport_opened_for_another_host_entry_is_closed_not_used(sandbox_factory):
    sandbox = sandbox_factory(1)
    host = load_inventory(sandbox.inventory_path).hosts["host0"]
    ahead.connect_ahead([host])
    other = host.model_copy(update={"python": "/usr/bin/python3"})  # same name, other entry
    assert ahead.take(other) is None
    assert ahead._opened == {}
    ahead.connect_ahead([host])
    ahead.discard()  # what no rollout took is closed
    assert ahead._opened == {} and ahead.take(host) is None
    opened = ahead.connect_ahead([host]) or ahead.take(host)
    assert opened is not None
    reply = opened.call(_facts(host))  # the connection opened ahead serves the request
    assert reply.results[0].ok and opened.stats.connects == 1
    opened.close()


def _delay_proxy():
    """bench/latency_proxy.py's DelayProxy (a TCP proxy adding a round-trip time)."""
    path = Path(__file__).resolve().parents[2] / "bench" / "latency_proxy.py"
    spec = importlib.util.spec_from_file_location("bench_latency_proxy", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass reads its own module while it is built
    spec.loader.exec_module(module)
    return module.DelayProxy


def test_closing_a_connection_still_opening_neither_waits_nor_leaks_it(sandbox_factory,
                                                                     tmp_path):  # fmt: skip
    """A command that stops (Ctrl-C, a refusal) while a connect ahead still runs must not
    wait for it (an unreachable host takes its whole timeout); what the connect opens
    once it ends is closed by its own thread."""
    sandbox = sandbox_factory(1)
    host = load_inventory(sandbox.inventory_path).hosts["host0"]
    proxy = _delay_proxy()((host.address, host.port), 0.3).start()  # ~6 RTT: ~2 s to connect
    key = sandbox.known_hosts.read_text().split(None, 1)[1]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{proxy.port} {key}")
    slow = host.model_copy(
        update={"address": "127.0.0.1", "port": proxy.port, "known_hosts": str(known)}
    )
    ahead.connect_ahead([slow])
    transport = ahead.take(slow)
    started = time.monotonic()
    transport.close()
    assert time.monotonic() - started < 0.2  # did not wait for the handshake
    transport._opening.join(timeout=60)
    assert transport.stats.connects == 1  # the connect went through...
    assert transport._clients == []  # ...and its thread closed it, nobody being left to
    proxy.stop()
