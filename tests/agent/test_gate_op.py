"""gate_measure against a fake SGLang on loopback (stdlib http.server in a thread): exact
replay numbers, the load's stop rules and deadline, health polls, /metrics, save_as/read_as,
and http_proxy ignored. Ops are called directly with a Ctx on a temp state dir."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import gate_load, main, ops_gate, wire
from ddtree_deploy.agent.host.state import Ctx
from ddtree_deploy.agent.host.wire_results import GateMeasurement
from tests.agent.test_host_modules import request

PROMPTS = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}, {"text": "hello"}]
METRICS = "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 7\n"


@dataclass
class FakeSglang:
    """Knobs of the fake server (set them before the op runs) and what it saw."""

    url: str = ""
    delay_s: float = 0.0  # before every /generate answer
    fail_after: int | None = None  # /generate answers HTTP 500 after this many requests
    hang_after: int | None = None  # /generate sleeps `hang_s` after this many requests
    hang_s: float = 5.0
    drip_s: float | None = None  # /generate sends its body one byte per drip_s seconds
    token: str | None = None  # /generate answers 401 without "Authorization: Bearer <token>"
    metrics_404: bool = False
    health_fail_after: int | None = None  # /health_generate answers 503 after this many polls
    algorithm: str | None = "DDTREE"
    payloads: list[dict] = field(default_factory=list)
    health_polls: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def output_ids(prompt: dict, max_new_tokens: int) -> list[int]:
    """The fake's greedy output: derived from the prompt, max_new_tokens long (no EOS)."""
    seed = sum(prompt["input_ids"]) if "input_ids" in prompt else len(prompt["text"])
    return [(seed * 7 + i) % 1000 for i in range(max_new_tokens)]


def verify_ct(max_new_tokens: int) -> int:
    """The fake speculates: one verify step per 3 tokens (rounded up)."""
    return -(-max_new_tokens // 3)


def make_handler(fake: FakeSglang) -> type[BaseHTTPRequestHandler]:
    """A request handler imitating sglang's /generate, /server_info, /health_generate,
    /metrics, driven by `fake`'s knobs."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self, status: int, body: str, drip_s: float | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if drip_s is None:
                self.wfile.write(data)
                return
            for byte in data:
                if fake.release.wait(drip_s):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()

        def do_GET(self) -> None:
            if self.path == "/server_info":
                self.answer(200, json.dumps({"speculative_algorithm": fake.algorithm}))
            elif self.path == "/metrics" and not fake.metrics_404:
                self.answer(200, METRICS)
            elif self.path == "/health_generate":
                with fake.lock:
                    fake.health_polls += 1
                    failing = fake.health_fail_after is not None and (
                        fake.health_polls > fake.health_fail_after
                    )
                self.answer(503 if failing else 200, "")
            else:
                self.answer(404, "not found")

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with fake.lock:
                fake.payloads.append(payload)
                number = len(fake.payloads)
            if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                return self.answer(401, '{"error": "unauthorized"}\n')
            if fake.hang_after is not None and number > fake.hang_after:
                fake.release.wait(fake.hang_s)
            if fake.fail_after is not None and number > fake.fail_after:
                return self.answer(500, "Internal Server Error: out of memory")
            time.sleep(fake.delay_s)
            sampling = payload["sampling_params"]
            n = sampling["max_new_tokens"]
            prompt = {k: v for k, v in payload.items() if k != "sampling_params"}
            meta = {"completion_tokens": n, "spec_verify_ct": verify_ct(n)}
            body = {"text": "x", "output_ids": output_ids(prompt, n), "meta_info": meta}
            self.answer(200, json.dumps([body] if "text" in prompt else body), fake.drip_s)

    return Handler


class QuietServer(ThreadingHTTPServer):
    """The fake's server: a client that hangs up mid-answer (the gate's timeouts and
    deadlines do, on purpose) is not an error worth a traceback on stderr."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, reset, ...
            super().handle_error(request, client_address)


@pytest.fixture
def fake() -> Iterator[FakeSglang]:
    """A fake sglang on 127.0.0.1 (a free port), stopped after the test."""
    fake = FakeSglang()
    server = QuietServer(("127.0.0.1", 0), make_handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    fake.release.set()  # hanging and dripping handlers end now
    server.shutdown()
    server.server_close()


def measure(tmp_path: Path, fake: FakeSglang, **args: object) -> GateMeasurement:
    """Run gate_measure on a temp state dir against `fake`; return the measurement."""
    raw = dict({"server_url": fake.url, "prompts": PROMPTS, "max_new_tokens": 5}, **args)
    ctx = Ctx({"state_dir": str(tmp_path / "state")})
    return ops_gate.op_gate_measure(ctx, wire.parse_args("gate_measure", raw))


def test_replay_numbers_are_exact_and_the_warmup_is_not_counted(tmp_path, fake):
    got = measure(tmp_path, fake, warmup_requests=2, rounds=3, phase="baseline")
    replay = got.replay
    assert replay.requests == 9 and replay.errors == 0 and replay.first_error is None
    assert replay.tokens == 9 * 5 and replay.verify_ct == 9 * verify_ct(5)
    assert [r["tokens"] for r in replay.rounds] == [15, 15, 15]
    assert all(r["wall_s"] > 0 for r in replay.rounds) and len(replay.latencies_s) == 9
    assert replay.outputs == [output_ids(p, 5) for p in PROMPTS]
    assert len(fake.payloads) == 2 + 9  # the warm-up was sent, and only the replay counted
    assert fake.payloads[0] == dict(
        PROMPTS[0], sampling_params={"temperature": 0, "max_new_tokens": 5, "ignore_eos": True}
    )
    assert got.algorithm == "DDTREE" and got.phase == "baseline" and got.load is None
    assert got.server_url == fake.url and got.at.endswith("Z") and got.saved is None
    assert got.metrics_before is None and got.metrics_error is None
    assert "stored" not in got.to_dict()


def test_replay_errors_are_named_and_outputs_keep_their_place(tmp_path, fake):
    fake.fail_after = 2  # the warm-up takes 1, the replay's first round gets 1 answer
    got = measure(tmp_path, fake, warmup_requests=1, rounds=2)
    # 3 errors in a row (2 in round 1, the first of round 2): the replay stops there
    assert got.replay.errors == 3 and got.replay.requests == 4 and got.replay.tokens == 5
    assert got.replay.outputs == [output_ids(PROMPTS[0], 5), None, None]
    assert got.replay.first_error == (
        f"POST {fake.url}/generate: HTTP 500 Internal Server Error: out of memory"
        " (replay stopped after 3 errors in a row)"
    )
    fake.token, fake.algorithm = "secret", "NONE"
    got = measure(tmp_path, fake, warmup_requests=0, rounds=1)
    assert got.replay.first_error.startswith(
        f'POST {fake.url}/generate: HTTP 401 {{"error": "unauthorized"}}'
    )
    assert got.algorithm is None


def test_the_load_runs_until_both_requests_and_bake_are_done(tmp_path, fake):
    fake.delay_s = 0.02
    started = time.monotonic()
    health = f"{fake.url}/health_generate"
    got = measure(tmp_path, fake, rounds=1, warmup_requests=0, load_requests=6, concurrency=2,
                  bake_s=0.5, health_url=health, health_every_s=0.1)  # fmt: skip
    load = got.load
    assert load is not None and load.stopped_early is None and load.errors == 0
    assert load.requests > 6 and load.wall_s >= 0.5  # the bake keeps it going past 6
    assert load.tokens == 5 * load.requests == 5 * len(load.latencies_s)
    assert load.health_polls >= 3 and load.health_failures == 0  # every 0.1 s, and at the end
    assert time.monotonic() - started < 3
    quick = measure(tmp_path, fake, rounds=1, warmup_requests=0, load_requests=5, concurrency=2)
    assert quick.load is not None and quick.load.requests == 5 and quick.load.health_polls == 0


def test_a_hang_ends_the_load_early_with_the_timeouts_named(tmp_path, fake):
    fake.hang_after = 5  # the replay's 3 and 2 of the load are answered
    timeout_s, concurrency, requests = 0.5, 2, 20
    started = time.monotonic()
    got = measure(tmp_path, fake, rounds=1, warmup_requests=0, request_timeout_s=timeout_s,
                  load_requests=requests, concurrency=concurrency)  # fmt: skip
    elapsed = time.monotonic() - started
    load = got.load
    assert load is not None and 2 * concurrency <= load.errors < 3 * concurrency
    assert load.requests == 2 + load.errors  # a worker may send once more before the stop
    timed_out = f"POST {fake.url}/generate: timed out after 0.5s"
    assert load.first_error == timed_out
    assert load.stopped_early == f"4 consecutive errors: {timed_out}"
    assert elapsed < gate_load.deadline_s(wire.parse_args("gate_measure", {
        "server_url": "", "prompts": [], "load_requests": requests,
        "concurrency": concurrency, "request_timeout_s": timeout_s}))  # fmt: skip


def test_a_dripping_server_is_cut_off_at_the_deadline(tmp_path, fake):
    """Each byte comes within the socket timeout, so only the load's deadline ends it."""
    fake.drip_s = 0.1  # ~100 bytes: ~10 s per answer, far past the deadline of 0.5 * 2
    started = time.monotonic()
    got = measure(tmp_path, fake, rounds=0, warmup_requests=0, request_timeout_s=0.5,
                  load_requests=2, concurrency=2)  # fmt: skip
    elapsed = time.monotonic() - started
    assert (
        got.load is not None and got.load.stopped_early == "deadline: 2 requests still unanswered"
    )
    assert got.load.requests == 0 and got.replay.requests == 0
    assert elapsed < 0.5 * 2 + 0.5 + gate_load.JOIN_SLACK_S + 0.5


def test_health_failures_are_counted_with_the_first_reason(tmp_path, fake):
    fake.health_fail_after = 1
    health = f"{fake.url}/health_generate"
    got = measure(tmp_path, fake, rounds=1, warmup_requests=0, load_requests=2, concurrency=1,
                  bake_s=0.5, health_url=health, health_every_s=0.1)  # fmt: skip
    load = got.load
    assert load is not None and load.health_polls >= 3
    assert load.health_failures == load.health_polls - 1
    assert load.first_health_failure == f"GET {health}: HTTP 503"


def test_metrics_are_read_before_and_after_and_a_404_is_explained(tmp_path, fake):
    got = measure(tmp_path, fake, rounds=1, metrics=True)
    assert got.metrics_before == got.metrics_after == METRICS and got.metrics_error is None
    fake.metrics_404 = True
    got = measure(tmp_path, fake, rounds=1, metrics=True)
    assert got.metrics_before is None and got.metrics_after is None
    assert got.metrics_error == (
        f"GET {fake.url}/metrics: HTTP 404 (is the server started with --enable-metrics?)"
    )


def test_save_as_writes_the_result_0600_and_read_as_returns_it(tmp_path, fake):
    rel = "backups/d1/gate-baseline.json"
    got = measure(tmp_path, fake, rounds=1, save_as=rel)
    path = tmp_path / "state" / rel
    assert got.saved == str(path) and path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state" / "backups").stat().st_mode & 0o777 == 0o700
    assert json.loads(path.read_text()) == got.to_dict()
    again = measure(tmp_path, fake, rounds=1, phase="check", read_as=rel)
    assert again.stored == got.to_dict() and again.saved is None
    assert GateMeasurement.from_dict(again.stored) == got
    assert measure(tmp_path, fake, rounds=1, read_as="backups/none.json").stored is None
    path.write_text("{oops")
    with pytest.raises(wire.OpFailed, match="gate-baseline.json: not JSON") as caught:
        measure(tmp_path, fake, rounds=1, read_as=rel)
    assert caught.value.code == wire.Code.BACKUP_UNREADABLE


@pytest.mark.parametrize("rel", ["../x", "/abs/x.json", "backups/../../x"])
@pytest.mark.parametrize("key", ["save_as", "read_as"])
def test_paths_outside_the_state_dir_are_refused_before_any_request(tmp_path, fake, key, rel):
    with pytest.raises(wire.OpFailed, match=f"gate_measure {key}: refusing path") as caught:
        measure(tmp_path, fake, **{key: rel})
    assert caught.value.code == wire.Code.UNSAFE_PATH and repr(rel) in str(caught.value)
    assert fake.payloads == []


def test_loopback_never_goes_through_http_proxy(tmp_path, fake, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(urllib.error.URLError):  # what a default opener would do
        urllib.request.build_opener().open(f"{fake.url}/server_info", timeout=5)
    got = measure(tmp_path, fake, rounds=1, metrics=True)
    assert got.replay.errors == 0 and got.algorithm == "DDTREE" and got.metrics_before


def test_an_unreachable_server_is_measured_not_raised(tmp_path, fake):
    fake.url = "http://127.0.0.1:9"
    got = measure(tmp_path, fake, rounds=1, load_requests=3, concurrency=1, metrics=True)
    assert got.algorithm is None and got.replay.errors == 3
    assert got.replay.first_error.startswith("POST http://127.0.0.1:9/generate: ")
    assert got.load is not None and got.load.stopped_early.startswith("2 consecutive errors")
    assert got.metrics_error.startswith("GET http://127.0.0.1:9/metrics: ")


def test_gate_measure_is_dispatched_and_needs_no_flock_alone(tmp_path, fake):
    state = tmp_path / "state"
    gate = ("gate_measure", {"server_url": fake.url, "prompts": PROMPTS, "rounds": 1})
    assert main._hold_agent_lock(request(state, gate)) == (None, "read-only")
    fd, note = main._hold_agent_lock(request(state, gate, ("prune", {})))
    assert note == "held"  # mixed with an op that changes the host: the flock is taken
    os.close(fd)
    answer = main.handle(request(state, gate))
    assert answer["ok"], answer
    data = answer["results"][0]["data"]
    assert data["replay"]["requests"] == 3 and "stored" not in data
    bad = main.handle(request(state, ("gate_measure", {"server_url": fake.url, "prompts": []})))
    assert bad["results"][0]["code"] == "bad_args"


def test_the_bundle_measures_on_python_38(oldest_host, fake):
    """The real bundle on python 3.8 (bare bootstrap): replay, a load ended by timeouts,
    /metrics, save_as; the answer reads back as a GateMeasurement."""
    fake.hang_after = 4
    args = {"server_url": fake.url, "prompts": PROMPTS, "max_new_tokens": 5, "rounds": 1,
            "warmup_requests": 0, "request_timeout_s": 0.5, "load_requests": 8,
            "concurrency": 1, "metrics": True, "save_as": "gate/m.json"}  # fmt: skip
    answer = oldest_host.call(("gate_measure", args))
    got = answer.result_as("gate_measure", GateMeasurement)
    assert got is not None, answer
    assert got.replay.tokens == 15 and got.replay.outputs[2] == output_ids(PROMPTS[2], 5)
    assert got.load is not None and got.load.errors == 2 and got.load.requests == 3
    assert got.load.first_error == f"POST {fake.url}/generate: timed out after 0.5s"
    assert got.metrics_before == METRICS and got.saved == str(oldest_host.state / "gate/m.json")


def test_without_prompts_the_stored_baselines_are_replayed(tmp_path, fake):
    rel = "backups/d1/gate-after.json"
    got = measure(tmp_path, fake, rounds=1, save_as=rel, max_new_tokens=7)
    assert got.prompts == PROMPTS and got.max_new_tokens == 7
    again = measure(tmp_path, fake, rounds=1, phase="check", read_as=rel, prompts=[])
    assert again.prompts == PROMPTS and again.max_new_tokens == 7
    assert again.replay.outputs == got.replay.outputs
    with pytest.raises(wire.OpFailed, match="no stored measurement holds any"):
        measure(tmp_path, fake, rounds=1, prompts=[])
