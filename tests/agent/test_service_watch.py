"""The restart and health ops' watchdog on a real `command` service (the REAL agent bundle,
a real server process and real sockets, no root): a fail line in the log ends the wait at
once, progress lines come back in order, a stopped instance's leftovers are refused or
ended. Each check has its control: without the pattern, the same server times out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.stages import op_builders as ops
from tests.agent.test_service_bundle import PID_OF, free_port

# svc.py start|stop|status MODE PORT: `serve` runs in a session of its own, its output to
# server.log. Modes: http (serves at once), progress (two sglang marks, then serves),
# schedex (logs sglang's scheduler crash line, stays up and never serves).
SERVICE = (
    textwrap.dedent(
        """\
    import http.server, os, signal, subprocess, sys, time
    here = os.path.dirname(os.path.abspath(__file__))
    pidfile, mode, port = os.path.join(here, "pid"), sys.argv[2], sys.argv[3]
    """
    )
    + PID_OF
    + textwrap.dedent(
        """\
    def say(line):
        print(line, flush=True)
    if sys.argv[1] == "start":
        log = open(os.path.join(here, "server.log"), "a")
        proc = subprocess.Popen([sys.executable, __file__, "serve", mode, port], cwd=here,
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        open(pidfile, "w").write(str(proc.pid))
    elif sys.argv[1] == "stop":
        if pid():
            os.kill(pid(), signal.SIGTERM)
            while pid():
                time.sleep(0.02)
    elif sys.argv[1] == "status":
        sys.exit(0 if pid() else 3)
    else:
        if mode == "schedex":
            say("[t] Scheduler hit an exception: Traceback (most recent call last):")
            time.sleep(0.5)  # the traceback's last line, the error, comes a little later
            say("ValueError: DDTREE refuses this target (a hybrid one)")
            time.sleep(600)
        if mode == "progress":
            say("[t] Load weight end. elapsed=0.05 s, key=SECRET-KEY-1")
            time.sleep(0.3)
            say("[t] The server is fired up and ready to roll!")
        server = http.server.HTTPServer(("127.0.0.1", int(port)),
                                        http.server.SimpleHTTPRequestHandler)
        server.serve_forever()
    """
    )
)

HOLDER = "import socket, sys, time\n" \
    "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n" \
    "print('listening', flush=True); time.sleep(600)\n"  # fmt: skip


@pytest.fixture
def service(fake_host, tmp_path, monkeypatch):
    """(fake_host, make_host(mode, **service keys), the log file): a `command` service."""
    script = tmp_path / "svc" / "svc.py"
    script.parent.mkdir()
    script.write_text(SERVICE)
    port = free_port()
    argv = f"{sys.executable} {script} {{}} {{}} {port}"
    log = script.parent / "server.log"
    monkeypatch.setenv("WATCH_TEST_KEY", "SECRET-KEY-1")  # the agent inherits it

    def make_host(mode: str, **keys: object) -> Host:
        spec = ServiceSpec(kind="command", start=argv.format("start", mode),
                           stop=argv.format("stop", mode), status=argv.format("status", mode),
                           log_file=str(log), health_url=f"http://127.0.0.1:{port}/",
                           poll_interval_s=0.1, **keys)  # fmt: skip
        return Host(name="x", address="local", service=spec,
                    smoke={"api_key_env": "WATCH_TEST_KEY"})  # fmt: skip

    yield fake_host, make_host, log, port
    subprocess.run(argv.format("stop", "http").split(), check=False)


def restart_and_health(fake_host, host: Host):
    return fake_host.call_ops(*[op for _, op in ops.service_ops(host)])


def test_a_fail_line_ends_a_900_s_wait_at_once_and_without_it_the_wait_runs_out(service):
    fake_host, make_host, log, _ = service
    started = time.monotonic()
    answer = restart_and_health(fake_host, make_host("schedex", ready_timeout_s=900))
    waited = time.monotonic() - started
    failed = answer.failed
    assert failed.op == "health" and failed.code == Code.UNHEALTHY, answer
    assert "fail pattern 'Scheduler hit an exception'" in failed.error, failed.error
    assert "Scheduler hit an exception: Traceback" in failed.error
    # the error itself, written after the line that matched, is quoted too
    assert "the server's error: ValueError: DDTREE refuses this target" in failed.error
    assert "Scheduler hit an exception" in failed.data["log"]
    assert waited < 60, waited  # not the 900 s the service allows
    # control: the same server with no fail patterns is only caught by the timeout
    answer = restart_and_health(fake_host, make_host("schedex", ready_timeout_s=2,
                                                     fail_patterns=[]))  # fmt: skip
    assert answer.failed.code == Code.UNHEALTHY and "not ready after 2" in answer.failed.error


def test_progress_lines_come_back_in_order_with_their_times_key_redacted(service):
    fake_host, make_host, log, _ = service
    answer = restart_and_health(fake_host, make_host("progress", ready_timeout_s=60))
    assert answer.ok, answer
    progress = answer.result("health").data["progress"]
    assert [p["pattern"] for p in progress] == [
        "Load weight end",
        "The server is fired up and ready to roll",
    ]
    assert progress[0]["after_s"] <= progress[1]["after_s"]
    assert "SECRET-KEY-1" not in str(progress) and "key=***" in progress[0]["line"]
    restart = answer.result("restart").data
    assert restart["restarted"] is True and "gpu" in restart  # the clean-start check ran
    # a second restart reads only the new instance's lines, not the first one's
    again = restart_and_health(fake_host, make_host("progress", ready_timeout_s=60))
    assert len(again.result("health").data["progress"]) == 2, again
    assert log.read_text().count("fired up") == 2


def test_a_process_left_on_the_port_is_refused_by_name_then_ended_when_allowed(service):
    fake_host, make_host, log, port = service
    argv = [sys.executable, "-c", HOLDER, str(port), "--api-key", "sk-leftover-secret"]
    holder = subprocess.Popen(argv, text=True, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "listening"
        refused = restart_and_health(fake_host, make_host("http", ready_timeout_s=30))
        failed = refused.failed
        assert failed.op == "restart" and failed.code == Code.RESTART_FAILED, refused
        assert f"pid {holder.pid} (listens on 127.0.0.1:{port}" in failed.error, failed.error
        assert "kill_leftovers = true" in failed.error
        assert "sk-leftover-secret" not in str(refused) and "--api-key ***" in failed.error
        assert [p["pid"] for p in failed.data["leftovers"]] == [holder.pid]
        assert not log.exists()  # the start never ran
        assert holder.poll() is None  # and nothing was killed

        ended = restart_and_health(fake_host, make_host("http", ready_timeout_s=30,
                                                        kill_leftovers=True))  # fmt: skip
        assert ended.ok, ended
        found = ended.result("restart").data["leftovers_ended"]
        assert [p["pid"] for p in found] == [holder.pid]
        assert "-c import socket" in found[0]["cmdline"]
        assert holder.wait(timeout=10) == -signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()


def test_an_orphaned_sglang_process_is_a_leftover_a_live_servers_child_is_not(service, tmp_path):
    """sglang titles its scheduler `sglang::scheduler`: one whose server died is in the way
    (GPU memory); one whose parent is a running server's python is another server's."""
    fake_host, make_host, _, _ = service
    # its parent is a shell, as a dead server's scheduler's is init or a subreaper
    script = "(exec -a sglang::scheduler sleep 600) & echo $!; wait"
    shell = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    orphan_pid = int(shell.stdout.readline())
    parent = tmp_path / "sglang_launch_server.py"  # a "server" whose command line says sglang
    parent.write_text("import subprocess, time\n"
                      "subprocess.Popen(['bash', '-c', 'exec -a sglang::detokenizer sleep 600'])\n"
                      "time.sleep(600)\n")  # fmt: skip
    server = subprocess.Popen([sys.executable, str(parent)], start_new_session=True)
    try:
        time.sleep(0.5)
        refused = restart_and_health(fake_host, make_host("http", ready_timeout_s=30))
        assert refused.failed is not None and refused.failed.op == "restart", refused
        found = {p["pid"]: p for p in refused.failed.data["leftovers"]}
        assert orphan_pid in found, refused.failed.error
        assert found[orphan_pid]["why"] == "orphaned sglang:: process (its server is gone)"
        assert found[orphan_pid]["cmdline"] == "sglang::scheduler 600"
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        assert children and not {int(c) for c in children} & set(found), found
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        os.killpg(server.pid, signal.SIGKILL)
        shell.wait()
        server.wait()


def test_the_log_watch_waits_for_whole_lines_and_rereads_a_truncated_log(tmp_path):
    from ddtree_deploy.agent.host.service_watch import LogWatch

    log = tmp_path / "server.log"
    log.write_text("old instance: Scheduler hit an exception\n")  # before the start: not read
    watch = LogWatch(str(log), log.stat().st_size, ["Scheduler hit"], ["fired up"],
                     time.monotonic())  # fmt: skip
    assert watch.poll() is None
    with log.open("a") as fh:
        fh.write("[t] The server is fired up")  # no newline yet: still being written
    assert watch.poll() is None and watch.progress == []
    with log.open("a") as fh:
        fh.write(" and ready to roll!\n")
    assert watch.poll() is None and [p["line"] for p in watch.progress] == [
        "[t] The server is fired up and ready to roll!"
    ]
    log.write_text("[t] Scheduler hit an exception: boom\n")  # truncated by the new start
    assert watch.poll() == ("Scheduler hit", "[t] Scheduler hit an exception: boom")
