"""The payload and its first stage: one `python -c` argv builds the `ddtree_agent` package
from the bundle on stdin; one process answers many requests; tracebacks name real files."""

from __future__ import annotations

import base64
import json
import zlib

from ddtree_deploy.agent import agent_command, packed_agent
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
    assert 'File "ddtree_agent/ops_files.py", line' in trace  # real module file names ...
    assert "py_compile.compile(full, doraise=True)" in trace  # ... and their source lines
