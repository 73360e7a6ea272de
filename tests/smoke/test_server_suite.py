"""smoke/server.py against an in-process fake server: each gap fails with its URL and values.

The real stub behind real sshd hosts is covered in test_smoke_hosts.py; this file pins the
suite's decisions (fallback route, derived accept length, never gating on accept rate) and
the lossless gate's logic: references found by model fingerprint, token-for-token
comparison sequentially and concurrently, record mode. The fake stands in for sglang's
HTTP answers only; the real server is proven over ssh.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import SMOKE_DIR

SERVER_SUITE = SMOKE_DIR / "server.py"
GOOD_INFO = {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 64}
GOOD_META = {"completion_tokens": 16, "spec_verify_ct": 5, "spec_accept_length": 3.2}


class FakeServer:
    """Answers GET/POST by path from `routes` ({path: (status, body)}); 404 otherwise."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any] | Callable[[dict], tuple[int, Any]]] = {}
        self.posted: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self, payload: dict | None = None) -> None:  # http.server calls this name
                route = fake.routes.get(self.path, (404, {"error": "no route"}))
                self.answer(*(route(payload or {}) if callable(route) else route))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.posted.append(payload)
                self.do_GET(payload)

            def answer(self, status: int, body: Any) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def healthy(self, info: dict | None = None, meta: dict | None = None) -> FakeServer:
        self.routes = {
            "/health_generate": (200, {}),
            "/server_info": (200, {**GOOD_INFO, **(info or {})}),
            "/generate": (200, {"text": " Paris.", "meta_info": {**GOOD_META, **(meta or {})}}),
        }
        return self


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def run_suite(
    url: str, service: str = "command", lossless: dict | None = None, **spec: Any
) -> tuple[int, dict]:
    """Run smoke/server.py like the agent does; return (exit code, its result line)."""
    request = {
        "options": {
            "server": {"server_url": url, "expected_algorithm": "DDTREE", "timeout_s": 5, **spec},
            "service": service,
            "lossless": lossless,
        }
    }
    done = subprocess.run(
        [sys.executable, str(SERVER_SUITE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def checks_of(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


def test_healthy_ddtree_server_passes(fake):
    code, result = run_suite(fake.healthy().url, expected_ddtree_budget=64, max_new_tokens=8)
    assert code == 0 and result["passed"] and not result["skipped"], result
    assert set(checks_of(result)) == {"health", "server_info", "generate", "acceptance"}
    sampling = fake.posted[0]["sampling_params"]
    assert sampling == {"temperature": 0, "max_new_tokens": 8}


@pytest.mark.parametrize(
    ("spec", "info", "meta", "check", "words"),
    [
        ({}, {"speculative_algorithm": "EAGLE"}, {}, "server_info", ["'DDTREE'", "'EAGLE'"]),
        ({"expected_ddtree_budget": 32}, {}, {}, "server_info", ["budget expected 32", "got 64"]),
        ({"min_accept_length": 2.0}, {}, {"spec_accept_length": 1.4}, "acceptance", ["1.400"]),
        ({}, {}, {"spec_verify_ct": 0}, "acceptance", ["spec_verify_ct expected > 0, got 0"]),
    ],
)
def test_each_gap_fails_saying_what_and_where(fake, spec, info, meta, check, words):
    code, result = run_suite(fake.healthy(info, meta).url, **spec)
    failed = [c for c in result["checks"] if not c["passed"]]
    assert code == 1 and not result["passed"]
    assert [c["name"] for c in failed] == [check]
    assert fake.url in failed[0]["detail"]
    for word in words:
        assert word in failed[0]["detail"]


def test_accept_rate_is_never_gated_and_length_can_be_derived(fake):
    fake.healthy(meta={"spec_accept_rate": 0.01})
    fake.routes["/get_server_info"] = fake.routes.pop("/server_info")  # an older sglang
    meta = {"completion_tokens": 12, "spec_verify_ct": 4}  # no spec_accept_length
    fake.routes["/generate"] = (200, {"text": "x", "meta_info": meta})
    code, result = run_suite(fake.url, min_accept_length=3.0)
    assert code == 0 and result["passed"], result
    assert "/get_server_info" in checks_of(result)["server_info"]["detail"]
    assert "completion_tokens/spec_verify_ct 3.000" in checks_of(result)["acceptance"]["detail"]


def test_unhealthy_server_stops_after_health(fake):
    fake.healthy()
    fake.routes["/health_generate"] = (503, {"ready": False})
    code, result = run_suite(fake.url)
    assert code == 1 and list(checks_of(result)) == ["health"]
    assert f"GET {fake.url}/health_generate: expected HTTP 200, got 503" in result["details"]


def test_no_speculation_expected_skips_the_acceptance_check(fake):
    fake.healthy(info={"speculative_algorithm": None}, meta={"spec_verify_ct": 0})
    code, result = run_suite(fake.url, expected_algorithm=None)
    assert code == 0 and "acceptance" not in checks_of(result), result


def test_host_without_service_is_skipped_never_passed():
    code, result = run_suite("http://127.0.0.1:9", service="none")
    assert code == 0 and result["skipped"] and not result["passed"]


# --- the lossless gate -----------------------------------------------------------------

PROMPTS = [
    {"input_ids": [3, 17, 5]},
    {"text": "The capital of France is"},
    {"input_ids": [1, 2, 3, 4]},
    {"text": "def add(a, b):"},
]
TOKENS = 20
SAMPLING = {"temperature": 0, "max_new_tokens": TOKENS, "ignore_eos": True}


def load_lossless() -> Any:
    """smoke/_lossless.py imported by path, as the controller does."""
    spec = importlib.util.spec_from_file_location("_lossless", SERVER_SUITE.parent / "_lossless.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOSSLESS = load_lossless()


def write_model(folder: Path, weights: bytes = b"\0" * 64, torch_dtype: str = "float32") -> Path:
    """A model folder as sglang loads it: config, tokenizer, one small safetensors file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "dtype": torch_dtype}))
    (folder / "tokenizer.json").write_text('{"model": {}}')
    header = {
        "w": {"dtype": "F32", "shape": [len(weights) // 4], "data_offsets": [0, len(weights)]}
    }
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + weights)
    return folder


def greedy_ids(prompt: dict, tokens: int = TOKENS) -> list[int]:
    """The fake target model's greedy output for a prompt."""
    seed = sum(prompt["input_ids"]) if "input_ids" in prompt else sum(map(ord, prompt["text"]))
    return [(seed + 7 * k) % 101 for k in range(tokens)]


def reference_for(model: Path, prompts: list[dict] = PROMPTS, **changes: Any) -> dict:
    """A shipped reference for `model`, stamped with the suite's own fingerprint code."""
    reference = {
        "format": 1,
        "model": "fake-tiny",
        "fingerprint": LOSSLESS.model_fingerprint(str(model)),
        "dtype": "float32",
        "source": "made by the test from greedy_ids",
        "max_new_tokens": TOKENS,
        "sampling_params": SAMPLING,
        "outputs": [{"prompt": p, "output_ids": greedy_ids(p)} for p in prompts],
    }
    return reference | changes


def serve_model(
    fake: FakeServer,
    model: Path,
    algorithm: str | None = "DDTREE",
    hold_s: float = 0.0,
    tamper: Callable[[dict, list[int], bool], list[int]] | None = None,
) -> FakeServer:
    """Routes of a server running `model`; tamper(payload, ids, crowded) may change an answer.

    `crowded` is true when another /generate was in flight while this one was held hold_s.
    """
    in_flight = [0]

    def generate(payload: dict) -> tuple[int, dict]:
        with fake.lock:
            in_flight[0] += 1
            crowded = in_flight[0] > 1  # came while others ran
        time.sleep(hold_s)
        with fake.lock:
            crowded = crowded or in_flight[0] > 1  # others came meanwhile
            in_flight[0] -= 1
        tokens = payload["sampling_params"]["max_new_tokens"]
        prompt = {"input_ids": payload["input_ids"]} if "input_ids" in payload else payload
        ids = greedy_ids({"text": prompt["text"]} if "text" in prompt else prompt, tokens)
        ids = tamper(payload, ids, crowded) if tamper else ids
        meta = {"completion_tokens": tokens}
        if algorithm:
            meta["spec_verify_ct"] = (tokens + 1) // 2
        return 200, {"text": " x", "output_ids": ids, "meta_info": meta}

    info = {
        "speculative_algorithm": algorithm,
        "speculative_ddtree_budget": 64 if algorithm else None,
        "model_path": str(model),
        "tokenizer_path": str(model),
        "dtype": "float32",
        "version": "0.5.13.post1",
    }
    fake.routes = {
        "/health_generate": (200, {}),
        "/server_info": (200, info),
        "/generate": generate,
    }
    return fake


def gate(**changes: Any) -> dict:
    return {
        "required": True,
        "mode": "verify",
        "prompts": PROMPTS,
        "max_new_tokens": TOKENS,
        "concurrency": 4,
        "references": [],
        "record_dir": None,
    } | changes


def test_identical_outputs_pass_every_lossless_check(fake, tmp_path):
    model = write_model(tmp_path / "model")
    serve_model(fake, model)
    code, result = run_suite(fake.url, lossless=gate(references=[reference_for(model)]))
    assert code == 0 and result["passed"], result
    checks = checks_of(result)
    assert list(checks) == [
        "health",
        "server_info",
        "generate",
        "reference",
        "lossless_sequential",
        "lossless_concurrent",
        "acceptance",
    ]
    fingerprint = LOSSLESS.model_fingerprint(str(model))
    assert checks["reference"]["detail"].startswith(
        f"reference for {fingerprint[:12]} float32: shipped reference 1 ('fake-tiny'"
    )
    first_line = checks["lossless_sequential"]["detail"].splitlines()[0]
    assert first_line.startswith("4/4 prompts identical to the reference (80 tokens, 4 requests")
    # 8 lossless requests x 20 tokens over 8 x 10 verify steps
    assert checks["acceptance"]["detail"].splitlines()[0] == (
        "accept length 2.00 over 8 requests (spec_verify_ct 80), min 1.0"
    )
    lossless_posts = [p for p in fake.posted if p["sampling_params"] == SAMPLING]
    assert len(lossless_posts) == 8
    assert {"input_ids": [3, 17, 5], "sampling_params": SAMPLING} in lossless_posts
    assert {"text": "def add(a, b):", "sampling_params": SAMPLING} in lossless_posts


def test_one_token_differs_fails_naming_prompt_and_token(fake, tmp_path):
    model = write_model(tmp_path / "model")
    serve_model(fake, model)
    reference = reference_for(model)
    expected = reference["outputs"][2]["output_ids"]
    got = expected[17]
    expected[17] = (got + 1) % 101
    code, result = run_suite(fake.url, lossless=gate(references=[reference]))
    assert code == 1 and not result["passed"]
    failed = [c for c in result["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["lossless_sequential", "lossless_concurrent"]
    for check in failed:
        lines = check["detail"].splitlines()
        assert lines[0] == (
            f"prompt 3/4: first difference at token 17: expected {expected[17]}, got {got} "
            "(3/4 identical)"
        )
        assert lines[1].startswith(f"POST {fake.url}/generate, 4 requests in ")
        assert lines[2].startswith(
            "prompt 3/4 input_ids [1, 2, 3, 4]: first difference at token 17"
        )
    assert result["details"].startswith("lossless_sequential: prompt 3/4: first difference")


def test_concurrent_pass_catches_a_difference_sequential_cannot_see(fake, tmp_path):
    model = write_model(tmp_path / "model")

    def batched_differently(payload: dict, ids: list[int], crowded: bool) -> list[int]:
        if crowded and payload.get("text") == PROMPTS[1]["text"]:
            return ids[:5] + [ids[5] + 1] + ids[6:]
        return ids

    serve_model(fake, model, hold_s=0.3, tamper=batched_differently)
    lossless = gate(references=[reference_for(model)], concurrency=6)
    code, result = run_suite(fake.url, lossless=lossless)
    checks = checks_of(result)
    assert code == 1 and checks["lossless_sequential"]["passed"], result
    expected = greedy_ids(PROMPTS[1])
    detail = checks["lossless_concurrent"]["detail"]
    # 6 requests in flight for 4 prompts: prompt 2 went twice (requests 2 and 6)
    assert detail.splitlines()[0] == (
        f"prompt 2/4 (request 2/6): first difference at token 5: expected {expected[5]}, "
        f"got {expected[5] + 1} (4/6 identical)"
    )
    assert "prompt 2/4 (request 6/6)" in detail


def test_no_reference_when_required_fails_saying_why(fake, tmp_path):
    model = write_model(tmp_path / "model")
    other = write_model(tmp_path / "other", weights=b"\1" * 64)
    serve_model(fake, model)
    record_dir = tmp_path / "references"
    record_dir.mkdir()
    shipped = [reference_for(other), reference_for(model, dtype="bfloat16")]
    lossless = gate(references=shipped, record_dir=str(record_dir))
    code, result = run_suite(fake.url, lossless=lossless)
    assert code == 1
    detail = checks_of(result)["reference"]["detail"]
    fingerprint = LOSSLESS.model_fingerprint(str(model))
    lines = detail.splitlines()
    assert lines[0] == f"no reference for the running model: fingerprint {fingerprint[:12]} float32"
    assert f"fingerprint {fingerprint}, dtype float32" in lines[1]
    assert "shipped reference 1 ('fake-tiny'" in lines[2] and "is another model" in lines[2]
    assert "shipped reference 2" in lines[3] and "dtype bfloat16 differs" in lines[3]
    assert f"{record_dir}: no {fingerprint}-float32.json (there: none)" == lines[4]
    assert lines[5].startswith("no record attempt seen")
    assert "lossless_sequential" not in checks_of(result)


def test_not_required_reports_a_skipped_check(fake, tmp_path):
    serve_model(fake, write_model(tmp_path / "model"))
    code, result = run_suite(fake.url, lossless=gate(required=False))
    assert code == 0 and result["passed"], result
    reference = checks_of(result)["reference"]
    assert reference["skipped"] and reference["passed"]
    assert reference["detail"].startswith("skipped (not required): no reference for the running")
    assert "lossless_sequential" not in checks_of(result)
    assert checks_of(result)["acceptance"]["detail"].startswith("accept length 2.00 over 8")


def test_record_writes_only_from_a_plain_server_and_verify_then_uses_it(fake, tmp_path):
    model = write_model(tmp_path / "model")
    record_dir = tmp_path / "state" / "references"
    lossless = gate(record_dir=str(record_dir))
    fingerprint = LOSSLESS.model_fingerprint(str(model))
    path = record_dir / f"{fingerprint}-float32.json"

    serve_model(fake, model, algorithm="DFLASH")  # the old server already speculates
    code, result = run_suite(fake.url, lossless=lossless | {"mode": "record"})
    assert code == 0 and result["skipped"] and not result["passed"]
    assert result["details"] == "server runs DFLASH, not plain greedy: nothing recorded"
    assert not path.exists()
    code, result = run_suite(fake.url, lossless=lossless)
    assert code == 1
    why = checks_of(result)["reference"]["detail"]
    assert f"{fake.url}): server runs DFLASH, not plain greedy: nothing recorded" in why

    serve_model(fake, model, algorithm=None)  # plain target: record
    code, result = run_suite(fake.url, lossless=lossless | {"mode": "record"})
    assert code == 0 and result["passed"], result
    assert checks_of(result)["reference"]["detail"].splitlines() == [
        f"recorded 4 prompts × 20 tokens from {fake.url} for {fingerprint[:12]} float32",
        str(path),
    ]
    assert path.stat().st_mode & 0o777 == 0o600
    assert record_dir.stat().st_mode & 0o777 == 0o700
    recorded = json.loads(path.read_text())
    assert recorded["sampling_params"] == SAMPLING and recorded["dtype"] == "float32"
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.fullmatch(
        f"recorded on .+ from {fake.url} \\(no speculation\\) at {stamp}", recorded["source"]
    )
    assert [o["output_ids"] for o in recorded["outputs"]] == [greedy_ids(p) for p in PROMPTS]

    serve_model(fake, model, algorithm="DDTREE")  # after the restart: verify
    code, result = run_suite(fake.url, lossless=lossless)
    assert code == 0 and result["passed"], result
    assert checks_of(result)["reference"]["detail"].splitlines()[0].endswith(str(path))


def test_record_skips_a_server_that_is_down():
    code, result = run_suite("http://127.0.0.1:9", lossless=gate(mode="record", record_dir="/x"))
    assert code == 0 and result["skipped"]
    assert result["details"].startswith("server not healthy (GET http://127.0.0.1:9/health_gen")


def test_reference_of_another_fingerprint_or_sampling_is_not_used(fake, tmp_path):
    model = write_model(tmp_path / "model")
    edited = write_model(tmp_path / "edited")
    (edited / "config.json").write_text(json.dumps({"model_type": "llama", "dtype": "float32 "}))
    serve_model(fake, model)
    wrong_model = reference_for(edited) | {"model": "edited"}
    wrong_sampling = reference_for(model) | {"sampling_params": {**SAMPLING, "ignore_eos": False}}
    record_dir = tmp_path / "references"
    LOSSLESS.write_json_atomic(
        str(record_dir / f"{LOSSLESS.model_fingerprint(str(model))}-float32.json"),
        reference_for(model) | {"model": "recorded"},
    )
    lossless = gate(references=[wrong_model, wrong_sampling], record_dir=str(record_dir))
    code, result = run_suite(fake.url, lossless=lossless)
    assert code == 0 and result["passed"], result
    assert str(record_dir) in checks_of(result)["reference"]["detail"].splitlines()[0]


def test_prompt_missing_from_the_reference_fails_naming_it(fake, tmp_path):
    model = write_model(tmp_path / "model")
    serve_model(fake, model)
    reference = reference_for(model, prompts=PROMPTS[:3])
    code, result = run_suite(fake.url, lossless=gate(references=[reference]))
    checks = checks_of(result)
    assert code == 1 and not checks["reference"]["passed"]
    assert checks["reference"]["detail"].startswith("reference has no output for prompt 4/4: ")
    assert "'def add(a, b):'" in checks["reference"]["detail"]
    assert checks["lossless_sequential"]["passed"]  # the other three are still compared


def test_acceptance_over_lossless_requests_needs_verified_drafts_on_each(fake, tmp_path):
    model = write_model(tmp_path / "model")
    serve_model(fake, model)
    route = fake.routes["/generate"]

    def one_unverified(payload: dict) -> tuple[int, dict]:
        status, body = route(payload)
        if payload.get("input_ids") == [3, 17, 5]:
            body["meta_info"].pop("spec_verify_ct")  # sglang omits it when it is 0
        return status, body

    fake.routes["/generate"] = one_unverified
    code, result = run_suite(fake.url, lossless=gate(references=[reference_for(model)]))
    failed = [c for c in result["checks"] if not c["passed"]]
    assert code == 1 and [c["name"] for c in failed] == ["acceptance"]
    assert failed[0]["detail"].startswith(
        "spec_verify_ct expected > 0 on every request, 2 without; accept length 2.67 over 8"
    )
