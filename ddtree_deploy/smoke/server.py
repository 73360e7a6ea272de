"""Smoke suite `server`: the restarted sglang server is healthy, runs the expected
speculative algorithm, generates text, its drafts are accepted, and it is lossless.

Run by the host's python with a JSON object on stdin; `options.server` is the host's
SmokeSpec (server_url, expected_algorithm, expected_ddtree_budget, min_accept_length,
prompt, max_new_tokens, timeout_s), `options.service` the inventory's service kind and
`options.lossless` (absent or null: no lossless checks) the lossless gate: required, mode
("verify" | "record"), prompts, max_new_tokens, concurrency, references, record_dir and,
optionally, min_accept_length (else the SmokeSpec's).
Checks, in order (a server that is not healthy gets no further requests):

1. GET /health_generate answers 200.
2. GET /server_info (or /get_server_info) reports speculative_algorithm ==
   expected_algorithm and, when expected_ddtree_budget is set, the same
   speculative_ddtree_budget.
3. POST /generate (prompt, temperature 0, max_new_tokens) returns non-empty text.
4. With `options.lossless` (mode verify): `reference` finds the greedy outputs recorded
   for the running model (fingerprint and dtype, see _lossless.py), shipped ones first,
   then record_dir (_reference_choice.py); `lossless_sequential` and `lossless_concurrent`
   send every prompt alone, then `concurrency` at a time, and compare the output ids token
   for token.
5. When speculation is on: spec_verify_ct > 0 and the accept length is at least
   min_accept_length: over all lossless requests (sum of completion_tokens over sum of
   spec_verify_ct) when the gate runs, else over the one request of 3. A reference may
   carry its model's own floor (`min_accept_length`, e.g. the control target whose drafts
   are always right): the higher of the two applies.
   spec_accept_rate is never gated on: it is noisy by design.

Mode record runs instead before a restart, against the old server: when it is healthy and
plain greedy (no speculation) it generates every prompt one at a time and writes the
reference to record_dir; otherwise the suite is skipped, never failed.

Every failure names the URL and what was expected against what came back; the first line
of each check's detail is its summary. Requests bypass any proxy and carry the server's API
key (`options.server.api_key_file` / `api_key_env`, read here on the host; see _http.py);
a 401 says which inventory key to set. A host whose inventory says it runs no service
reports skipped. Stdlib only.
"""

import os
import socket
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import _lossless as lossless
import _reference_choice as choice
from _http import LocalHttp, read_api_key
from _suite import Suite

INFO_PATHS = ("/server_info", "/get_server_info")  # newer sglang, then older


def check_health(http, base, timeout_s):
    url = base + "/health_generate"
    status, body, error = http.call_json(url, timeout_s)
    if status == 200:
        return True, f"GET {url}: 200"
    return False, f"GET {url}: expected HTTP 200, got {error or status} {str(body)[:200]}"


def fetch_server_info(http, base, timeout_s):
    """-> (url, info dict or None, problem)."""
    for path in INFO_PATHS:
        url = base + path
        status, body, error = http.call_json(url, timeout_s)
        if status == 404:
            continue
        if status != 200 or not isinstance(body, dict):
            return url, None, f"GET {url}: expected HTTP 200 with JSON, got {error or status}"
        return url, body, ""
    return base + INFO_PATHS[0], None, f"GET {base}{{{','.join(INFO_PATHS)}}}: both 404"


def check_server_info(url, info, spec):
    """Expected algorithm (and DDTree budget) against what the server reports."""
    problems = []
    expected, got = spec.get("expected_algorithm"), info.get("speculative_algorithm")
    if expected is not None and str(got or "").upper() != str(expected).upper():
        problems.append(f"speculative_algorithm expected {expected!r}, got {got!r}")
    budget, got_budget = spec.get("expected_ddtree_budget"), info.get("speculative_ddtree_budget")
    if budget is not None and got_budget != budget:
        problems.append(f"speculative_ddtree_budget expected {budget!r}, got {got_budget!r}")
    if problems:
        return False, f"GET {url}: " + "; ".join(problems)
    return True, f"GET {url}: speculative_algorithm={got!r} ddtree_budget={got_budget!r}"


def generate(http, base, spec):
    """POST the prompt greedily -> (url, answer dict or None, problem)."""
    url = base + "/generate"
    payload = {
        "text": spec.get("prompt", "The capital of France is"),
        "sampling_params": {"temperature": 0, "max_new_tokens": spec.get("max_new_tokens", 16)},
    }
    status, body, error = http.call_json(url, float(spec.get("timeout_s", 60)), payload)
    if isinstance(body, list) and body:
        body = body[0]
    if status != 200 or not isinstance(body, dict):
        return url, None, f"POST {url}: expected HTTP 200 with JSON, got {error or status}"
    return url, body, ""


def check_text(url, answer):
    text = answer.get("text")
    if isinstance(text, str) and text.strip():
        return True, f"POST {url}: {len(text)} chars"
    return False, f"POST {url}: expected non-empty text, got {text!r}"


def check_acceptance(url, answer, min_accept_length):
    """spec_verify_ct > 0 and accept length >= min_accept_length."""
    meta = answer.get("meta_info") or {}
    verify_ct = meta.get("spec_verify_ct")
    if not isinstance(verify_ct, int | float) or verify_ct <= 0:
        return False, f"POST {url}: meta_info.spec_verify_ct expected > 0, got {verify_ct!r}"
    accept_length = meta.get("spec_accept_length")
    source = "spec_accept_length"
    if not isinstance(accept_length, int | float):
        completion_tokens = meta.get("completion_tokens") or 0
        accept_length, source = completion_tokens / verify_ct, "completion_tokens/spec_verify_ct"
    detail = f"{source} {accept_length:.3f}, min {min_accept_length}, spec_verify_ct {verify_ct}"
    if accept_length < min_accept_length:
        return False, f"POST {url}: accept length too low: {detail}"
    return True, f"POST {url}: {detail}"


def is_speculating(info):
    """True when /server_info names a speculative algorithm (sglang reports null when off)."""
    algorithm = (info or {}).get("speculative_algorithm")
    return algorithm is not None and str(algorithm).strip().upper() not in ("", "NONE", "NULL")


def read_lossless(lossless_options):
    """options.lossless -> (settings dict, problem); the settings have validated prompts."""
    prompts = lossless_options.get("prompts")
    if not isinstance(prompts, list) or not prompts:
        return None, "prompts: expected a non-empty list"
    for i, prompt in enumerate(prompts):
        problem = lossless.check_prompt(prompt)
        if problem:
            return None, f"prompts[{i}]: {problem}"
    try:
        max_new_tokens = int(lossless_options.get("max_new_tokens", 64))
        concurrency = int(lossless_options.get("concurrency", 8))
    except (TypeError, ValueError) as exc:
        return None, f"max_new_tokens/concurrency: {exc}"
    if max_new_tokens < 1 or concurrency < 1:
        return None, f"max_new_tokens {max_new_tokens} and concurrency {concurrency} must be >= 1"
    return {
        "prompts": prompts,
        "max_new_tokens": max_new_tokens,
        "concurrency": concurrency,
        "sampling_params": lossless.greedy_sampling_params(max_new_tokens),
        "required": lossless_options.get("required", True) is not False,
        "references": lossless_options.get("references") or [],
        "record_dir": lossless_options.get("record_dir") or None,
    }, ""


def generate_ids(http, url, prompt, sampling_params, timeout_s):
    """POST one prompt (its input_ids or text) -> (answer with output_ids or None, problem)."""
    payload = dict(prompt)
    payload["sampling_params"] = sampling_params
    status, body, error = http.call_json(url, timeout_s, payload)
    if isinstance(body, list) and body:
        body = body[0]
    if status != 200 or not isinstance(body, dict):
        got = f"{error or status} {str(body)[:200]}"
        return None, f"POST {url}: expected HTTP 200 with JSON, got {got}"
    ids = body.get("output_ids")
    if not isinstance(ids, list) or not all(type(t) is int for t in ids):
        return None, f"POST {url}: no output_ids list in the answer (keys {sorted(body)})"
    return body, ""


def run_pass(http, url, prompts, sampling_params, timeout_s, concurrency):
    """Generate every prompt, `concurrency` requests in flight -> [(prompt index, answer, problem)].

    With concurrency above the number of prompts the prompts are sent round-robin until
    `concurrency` requests are in flight, so the server batches as many as asked for.
    """
    order = [i % len(prompts) for i in range(max(len(prompts), concurrency))]
    if concurrency == 1:
        answers = [generate_ids(http, url, prompts[i], sampling_params, timeout_s) for i in order]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [
                pool.submit(generate_ids, http, url, prompts[i], sampling_params, timeout_s)
                for i in order
            ]
            answers = [f.result() for f in futures]
    return [(i, answer, problem) for i, (answer, problem) in zip(order, answers)]


def note_record(record_dir, note):
    """Leave record mode's last outcome in record_dir for verify to explain; never raises."""
    if not record_dir:
        return
    try:
        lossless.write_json_atomic(os.path.join(record_dir, choice.LAST_RECORD), note)
    except OSError:
        pass


def record_reference(suite, http, base, timeout_s, lossless_options):
    """Mode record: write the plain server's greedy outputs as a reference, or skip saying why."""
    settings, problem = read_lossless(lossless_options)
    record_dir = (settings or {}).get("record_dir") or ""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def skip(reason):
        note_record(record_dir, {"at": at, "url": base, "recorded": None, "reason": reason})
        suite.finish(skipped_reason=reason)

    if problem:
        skip(f"options.lossless: {problem}: nothing recorded")
    if not record_dir:
        skip("options.lossless.record_dir is not set: nothing recorded")
    healthy, detail = check_health(http, base, timeout_s)
    if not healthy:
        skip(f"server not healthy ({detail}): nothing recorded")
    info_url, info, problem = fetch_server_info(http, base, timeout_s)
    if info is None:
        skip(f"{problem}: nothing recorded")
    if is_speculating(info):
        skip(f"server runs {info.get('speculative_algorithm')}, not plain greedy: nothing recorded")
    fingerprint, dtype, _, problem = lossless.identify_model(info)
    if problem:
        skip(f"{problem}: nothing recorded")
    prompts, url = settings["prompts"], base + "/generate"
    results = run_pass(http, url, prompts, settings["sampling_params"], timeout_s, 1)
    failed = [problem for _, answer, problem in results if answer is None]
    if failed:
        skip(f"{failed[0]}: nothing recorded")
    reference = {
        "format": lossless.REFERENCE_FORMAT,
        "model": str(info.get("model_path")),
        "fingerprint": fingerprint,
        "dtype": dtype,
        "source": f"recorded on {socket.gethostname()} from {base} (no speculation) at {at}",
        "max_new_tokens": settings["max_new_tokens"],
        "sampling_params": settings["sampling_params"],
        "sglang_version": info.get("version"),
        "outputs": [{"prompt": prompts[i], "output_ids": a["output_ids"]} for i, a, _ in results],
    }
    path = os.path.join(record_dir, lossless.reference_filename(fingerprint, dtype))
    lossless.write_json_atomic(path, reference)
    note_record(record_dir, {"at": at, "url": base, "recorded": path, "reason": "recorded"})
    summary = (
        f"recorded {len(prompts)} prompts × {settings['max_new_tokens']} tokens from {base} "
        f"for {fingerprint[:12]} {dtype}"
    )
    suite.check("reference", True, f"{summary}\n{path}")
    suite.finish()


def verify_lossless(suite, http, base, info, timeout_s, lossless_options):
    """Mode verify: reference + sequential + concurrent comparison -> every lossless result."""
    settings, problem = read_lossless(lossless_options)
    if problem:
        suite.check("reference", False, f"options.lossless: {problem}")
        return None, None
    expected = choice.find_expected(suite, info, settings)
    url, prompts, sampling = base + "/generate", settings["prompts"], settings["sampling_params"]
    started = time.monotonic()
    sequential = run_pass(http, url, prompts, sampling, timeout_s, 1)
    middle = time.monotonic()
    concurrent = run_pass(http, url, prompts, sampling, timeout_s, settings["concurrency"])
    ended = time.monotonic()
    if expected is not None:
        suite.run(
            "lossless_sequential",
            lambda: lossless.compare_outputs(url, sequential, prompts, expected, middle - started),
        )
        suite.run(
            "lossless_concurrent",
            lambda: lossless.compare_outputs(url, concurrent, prompts, expected, ended - middle),
        )
    return sequential + concurrent, settings.get("chosen")


def model_floor(reference):
    """A reference's own min_accept_length (what that model must reach, e.g. the control
    target whose drafts are always right), or None."""
    floor = (reference or {}).get("min_accept_length")
    return float(floor) if isinstance(floor, int | float) else None


def main():
    suite = Suite("server")
    options = suite.input.get("options") or {}
    spec = options.get("server") or {}
    lossless_options = options.get("lossless") or {}
    if options.get("service") == "none":
        suite.finish(skipped_reason="skipped: the inventory gives this host no service")
    base = str(spec.get("server_url", "http://127.0.0.1:30000")).rstrip("/")
    timeout_s = float(spec.get("timeout_s", 60))
    key, where, problem = read_api_key(spec)
    if problem:
        suite.check("api_key", False, problem)
        suite.finish()
    suite.secrets.append(key)
    http = LocalHttp(key, where)
    if lossless_options and lossless_options.get("mode") == "record":
        try:
            record_reference(suite, http, base, timeout_s, lossless_options)
        except Exception as exc:  # record mode must never block a push
            suite.finish(skipped_reason=f"record failed: {exc!r}: nothing recorded")
    if not suite.run("health", lambda: check_health(http, base, timeout_s)):
        suite.finish()
    info_url, info, problem = fetch_server_info(http, base, timeout_s)
    if info is None:
        suite.check("server_info", False, problem)
    else:
        suite.run("server_info", lambda: check_server_info(info_url, info, spec))
    gen_url, answer, problem = generate(http, base, spec)
    if answer is None:
        suite.check("generate", False, problem)
        suite.finish()
    suite.run("generate", lambda: check_text(gen_url, answer))
    results, reference = None, None
    if lossless_options:
        try:
            results, reference = verify_lossless(
                suite, http, base, info, timeout_s, lossless_options
            )
        except Exception:  # a broken reference fails the gate, it is no crash
            suite.check(
                "lossless", False, "lossless gate crashed:\n" + traceback.format_exc()[-1500:]
            )
    if bool(spec.get("expected_algorithm")) or is_speculating(info):
        minimum = float(spec.get("min_accept_length", 1.0))
        if results is not None and lossless_options.get("min_accept_length") is not None:
            minimum = float(lossless_options["min_accept_length"])  # the gate's own floor
        if model_floor(reference) is not None and results is not None:
            minimum = max(minimum, model_floor(reference))  # the reference model's floor
        if results is None:
            suite.run("acceptance", lambda: check_acceptance(gen_url, answer, minimum))
        else:
            suite.run("acceptance", lambda: lossless.check_acceptance(gen_url, results, minimum))
    suite.finish()


if __name__ == "__main__":
    main()
