"""Smoke suite `server`: the restarted sglang server is healthy, runs the expected
speculative algorithm, generates text, and its drafts are verified and accepted.

Run by the host's python with a JSON object on stdin; `options.server` is the host's
SmokeSpec (server_url, expected_algorithm, expected_ddtree_budget, min_accept_length,
prompt, max_new_tokens, timeout_s) and `options.service` the inventory's service kind.
Checks, in order (a server that is not healthy gets no further requests):

1. GET /health_generate answers 200.
2. GET /server_info (or /get_server_info) reports speculative_algorithm ==
   expected_algorithm and, when expected_ddtree_budget is set, the same
   speculative_ddtree_budget.
3. POST /generate (prompt, temperature 0, max_new_tokens) returns non-empty text.
4. When speculation is on: meta_info.spec_verify_ct > 0 and the accept length
   (meta_info.spec_accept_length, else completion_tokens / spec_verify_ct) is at least
   min_accept_length. spec_accept_rate is never gated on: it is noisy by design.

Every failure names the URL and what was expected against what came back. A host whose
inventory says it runs no service reports skipped. Stdlib only.
"""

import json
import urllib.error
import urllib.request

from _suite import Suite

INFO_PATHS = ("/server_info", "/get_server_info")  # newer sglang, then older


def call_json(url, timeout_s, payload=None):
    """GET (or POST `payload` as JSON) -> (HTTP status or None, parsed body or text, error)."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (OSError, ValueError) as exc:
        return None, None, f"no answer: {getattr(exc, 'reason', exc)}"
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text), ""
    except ValueError:
        return status, text, ""


def check_health(base, timeout_s):
    url = base + "/health_generate"
    status, body, error = call_json(url, timeout_s)
    if status == 200:
        return True, f"GET {url}: 200"
    return False, f"GET {url}: expected HTTP 200, got {error or status} {str(body)[:200]}"


def fetch_server_info(base, timeout_s):
    """-> (url, info dict or None, problem)."""
    for path in INFO_PATHS:
        url = base + path
        status, body, error = call_json(url, timeout_s)
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


def generate(base, spec):
    """POST the prompt greedily -> (url, answer dict or None, problem)."""
    url = base + "/generate"
    payload = {
        "text": spec.get("prompt", "The capital of France is"),
        "sampling_params": {"temperature": 0, "max_new_tokens": spec.get("max_new_tokens", 16)},
    }
    status, body, error = call_json(url, float(spec.get("timeout_s", 60)), payload)
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


def main():
    suite = Suite("server")
    options = suite.input.get("options") or {}
    spec = options.get("server") or {}
    if options.get("service") == "none":
        suite.finish(skipped_reason="skipped: the inventory gives this host no service")
    base = str(spec.get("server_url", "http://127.0.0.1:30000")).rstrip("/")
    timeout_s = float(spec.get("timeout_s", 60))
    if not suite.run("health", lambda: check_health(base, timeout_s)):
        suite.finish()
    info_url, info, problem = fetch_server_info(base, timeout_s)
    if info is None:
        suite.check("server_info", False, problem)
    else:
        suite.run("server_info", lambda: check_server_info(info_url, info, spec))
    gen_url, answer, problem = generate(base, spec)
    if answer is None:
        suite.check("generate", False, problem)
        suite.finish()
    suite.run("generate", lambda: check_text(gen_url, answer))
    speculating = bool(spec.get("expected_algorithm")) or bool(
        (info or {}).get("speculative_algorithm")
    )
    if speculating:
        minimum = float(spec.get("min_accept_length", 1.0))
        suite.run("acceptance", lambda: check_acceptance(gen_url, answer, minimum))
    suite.finish()


if __name__ == "__main__":
    main()
