"""The payload and its first stage: one `python -c` argv builds the `ddtree_agent` package
from the bundle on stdin; one process answers many requests; tracebacks name real files."""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib

from ddtree_deploy.agent import agent_command, packed_agent, protocol
from ddtree_deploy.agent.protocol import BOOTSTRAP_IMPORTER, bundle
from tests.agent.bare import request_line, run_agent_lines


def test_the_payload_is_the_bundle_and_the_bootstrap_is_short():
    sent = json.loads(zlib.decompress(base64.b64decode(packed_agent())))
    assert sent == bundle() and "ddtree_agent.main" in sent and "ddtree_agent.wire" in sent
    argv = agent_command("/usr/bin/python3")
    assert argv[:2] == ["/usr/bin/python3", "-c"] and len(argv) == 3
    assert len(argv[2].splitlines()) <= 16 and argv[2].startswith(BOOTSTRAP_IMPORTER)
    assert "ddtree-agent" in argv[2]  # what `ps` and the sandbox tests look for


def test_one_process_answers_every_request_and_refuses_another_bundle(tmp_path):
    lines = [
        request_line(tmp_path, [("facts", {})]),
        "\n",  # blank lines are skipped
        request_line(tmp_path, [("facts", {})], agent_version="0" * 64),
        request_line(tmp_path, [("lock_acquire", {"run_id": "r", "holder": "h"})]),
        request_line(tmp_path, [("compile", {"site_packages": str(tmp_path), "paths": ["x.py"]})]),
        request_line(tmp_path, [("facts", {})]),
    ]
    facts, mismatch, lock, crash, later = run_agent_lines(lines)
    assert facts["ok"] and mismatch == {"ok": False, "results": [],
                                        "error": "agent version mismatch"}  # fmt: skip
    assert lock["ok"] and later["results"][0]["data"]["lock"]["run_id"] == "r"
    pids = {answer["results"][0]["data"]["agent_pid"] for answer in (facts, later)}
    assert len(pids) == 1  # one agent process served them all
    trace = crash["results"][0]["data"]["traceback"]
    assert crash["results"][0]["code"] == "exception"
    assert 'File "ddtree_agent/ops_compile.py", line' in trace  # real module file names ...
    assert "py_compile.compile(full, doraise=True)" in trace  # ... and their source lines


def test_every_host_thread_gets_the_one_bundle_packed_once(monkeypatch):
    """Many host threads ask for the payload at their first session at once: it is packed
    once (a slow pack would otherwise be paid by each thread that asked before it was
    stored), and every thread gets the same bytes."""
    packs: list[int] = []
    real = protocol.wire_bundle.pack_bundle

    def slow_pack(sources):
        packs.append(1)
        time.sleep(0.05)  # every thread asks while the first pack is under way
        return real(sources)

    monkeypatch.setattr(protocol.wire_bundle, "pack_bundle", slow_pack)
    protocol._packed_agent.cache_clear()
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(packed_agent())) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        protocol._packed_agent.cache_clear()  # the next caller packs with the real function
    assert len(packs) == 1 and len(got) == 8 and len(set(got)) == 1
