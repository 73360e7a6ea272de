"""restart, health and smoke by the REAL bundle on a temp host: a `command` service that is
a tiny local http.server, started and stopped by a script; suites that pass, fail, print
nothing, time out, and import a support module."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import SmokeResult
from ddtree_deploy.errors import ConfigError
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.stages import op_builders as ops
from tests.agent.test_ops_bundle import prepared

# The service scripts' `pid()`: the server's pid from `pidfile` while it runs, else None.
PID_OF = textwrap.dedent(
    """\
    def pid():
        try:
            value = int(open(pidfile).read())
            os.kill(value, 0)
            return value
        except (OSError, ValueError):
            return None
    """
)
SERVICE = (
    textwrap.dedent(
        """\
    import os, signal, subprocess, sys
    here = os.path.dirname(os.path.abspath(__file__))
    pidfile, port = os.path.join(here, "pid"), sys.argv[2]
    """
    )
    + PID_OF
    + textwrap.dedent(
        """\
    if sys.argv[1] == "start":
        log = open(os.path.join(here, "server.log"), "a")
        proc = subprocess.Popen([sys.executable, "-m", "http.server", port, "--bind", "127.0.0.1"],
                                cwd=here, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        open(pidfile, "w").write(str(proc.pid))
    elif sys.argv[1] == "stop":
        if pid():
            os.kill(pid(), signal.SIGTERM)
    else:
        sys.exit(0 if pid() else 3)
    """
    )
)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def service_host(fake_host, tmp_path):
    """fake_host plus an inventory Host whose `command` service is the tiny http server."""
    script = tmp_path / "svc" / "svc.py"
    script.parent.mkdir()
    script.write_text(SERVICE)
    port = free_port()
    argv = f"{sys.executable} {script} {{}} {port}"
    spec = ServiceSpec(kind="command", start=argv.format("start"), stop=argv.format("stop"),
                       status=argv.format("status"), log_file=str(script.parent / "server.log"),
                       health_url=f"http://127.0.0.1:{port}/", ready_timeout_s=20,
                       poll_interval_s=0.1)  # fmt: skip
    host = Host(name="x", address="local", service=spec)
    yield fake_host, host
    subprocess.run(argv.format("stop").split(), check=False)  # no server left behind


def test_restart_then_health_answer_200(service_host):
    fake_host, host = service_host
    answer = fake_host.call_ops(*[op for _, op in ops.service_ops(host)])
    assert answer.ok, answer
    gpu = "GPU check skipped: no nvidia-smi on the host"  # this machine has none
    assert answer.result("restart").data == {"restarted": True, "service": "service", "gpu": gpu}
    assert answer.result("health").data["healthy"] is True


def test_a_service_that_will_not_start_fails_restart_with_its_log(service_host):
    fake_host, host = service_host
    broken = host.service.model_copy(update={"start": "false"})
    answer = fake_host.call_ops(*[op for _, op in ops.service_ops(Host(
        name="x", address="local", service=broken))])  # fmt: skip
    assert answer.failed.op == "restart" and answer.failed.code == Code.RESTART_FAILED
    assert "false exited 1" in answer.failed.error
    assert set(answer.failed.data) == {"output", "log", "service"}


def test_health_gives_up_when_the_server_stops_or_never_answers(service_host):
    fake_host, host = service_host
    health = dict(ops.service_ops(host))["health"]  # nothing started: status says stopped
    answer = fake_host.call_ops(health)
    assert answer.failed.op == "health" and answer.failed.code == Code.UNHEALTHY
    assert "exited while starting" in answer.failed.error  # status said so: no long wait
    service = {"kind": "command", "start": ["true"], "stop": ["true"],
               "health_url": host.service.health_url, "ready_timeout_s": 0.3,
               "poll_interval_s": 0.1}  # fmt: skip
    timeout = fake_host.call(("health", {"service": service}))
    assert timeout.failed.code == Code.UNHEALTHY and "not ready after 0.3s" in timeout.failed.error
    skipped = fake_host.call(("restart", {"service": {"kind": "none"}}),
                             ("health", {"service": {"kind": "none"}}))  # fmt: skip
    assert [r.data for r in skipped.results] == [{"skipped": True}, {"skipped": True}]


class _ReadyOnFourth(http.server.BaseHTTPRequestHandler):
    """503 to the first three GETs, then 200 (counted on the server)."""

    def do_GET(self) -> None:  # the name http.server calls
        self.server.gets += 1  # type: ignore[attr-defined]
        self.send_response(200 if self.server.gets >= 4 else 503)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_health_asks_at_once_then_backs_off_from_milliseconds(fake_host):
    """Refused polls are retried after 5, 10, 20 ms..., not after poll_interval_s: with a 30 s
    interval and a 20 s deadline, a server ready at its 4th GET must pass with 4 polls (the
    old fixed interval would sleep 30 s after the first refusal and miss the deadline)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ReadyOnFourth)
    server.gets = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/health"
        service = {"kind": "command", "start": ["true"], "stop": ["true"], "health_url": url,
                   "ready_timeout_s": 20, "poll_interval_s": 30}  # fmt: skip
        answer = fake_host.call(("health", {"service": service}))
    finally:
        server.shutdown()
        server.server_close()
    assert answer.ok, answer
    data = answer.result("health").data
    assert data == {"healthy": True, "polls": 4, "progress": [], "service": "service"}
    assert server.gets == 4  # type: ignore[attr-defined]


# Each suite writes its result to the file the agent names (as _suite.py does).
RESULT = "open(os.environ['DDTREE_SMOKE_RESULT'], 'w').write"
SUITES = {
    "passes": f"import json, os, helper\n{RESULT}(json.dumps({{'passed': helper.OK}}))\n",
    "fails": textwrap.dedent(
        f"""\
        import json, os, sys
        data = json.load(sys.stdin)
        {RESULT}(json.dumps({{'passed': False, 'checks': [
            {{'name': 'answer', 'passed': False, 'detail': 'got ' + data['suite']}}]}}))
        """
    ),
    "silent": "import sys\nprint('not json', file=sys.stderr)\n",
    "skips": f"import json, os\n{RESULT}(json.dumps({{'passed': False, 'skipped': True}}))\n",
    "helper.py": "OK = True\n",
}


def test_an_empty_smoke_request_fails_and_a_suite_without_a_source_is_a_config_error(fake_host):
    """Review 3 finding 6: a smoke op with no suite passed, checking nothing. The agent fails
    it; the controller refuses to build one that drops a named suite."""
    host = Host(name="x", address="local")
    helpers_only = {"helper.py": "OK = True\n"}
    empty = fake_host.call_ops(ops.smoke_op(host, None, prepared(), helpers_only, 30))
    assert empty.failed is not None and empty.failed.code == Code.SMOKE_FAILED
    assert "no suites to run" in empty.failed.error
    with pytest.raises(ConfigError, match="smoke suite 'missing' has no source"):
        ops.smoke_op(host, None, prepared(), SUITES, 30, ["passes", "missing"])


def test_smoke_runs_each_suite_and_names_what_failed(fake_host):
    host = Host(name="x", address="local")
    op = ops.smoke_op(host, str(fake_host.site), prepared(), SUITES, 30)
    answer = fake_host.call_ops(op)
    assert answer.failed.code == Code.SMOKE_FAILED
    assert "fails: answer: got fails" in answer.failed.error
    assert "silent: no result (exit 0); stdout: (empty); stderr: not json" in answer.failed.error
    result = SmokeResult.from_dict(answer.failed.data)
    assert [r["suite"] for r in result.failed()] == ["fails", "silent"]
    only = ops.smoke_op(host, str(fake_host.site), prepared(), SUITES, 30, ["passes", "skips"])
    passed = fake_host.call_ops(only)
    assert passed.ok, passed
    assert [r["suite"] for r in passed.result_as("smoke", SmokeResult).suites] == [
        "passes",
        "skips",
    ]
    slow = {"sleeps": "import time\ntime.sleep(30)\n"}
    timed_out = fake_host.call_ops(ops.smoke_op(host, None, prepared(), slow, 0.5))
    assert "sleeps: timed out after 0.5s" in timed_out.failed.error
