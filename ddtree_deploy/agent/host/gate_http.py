"""The gate's HTTP calls to the server beside the agent: one greedy /generate, a GET of
text (/metrics, the health probe) and the speculative algorithm /server_info reports.

Every call goes through a proxy-free opener (the server is local: http_proxy must never
see it) and none raises for a network or server fault: a failure comes back as a one-line
reason ("POST URL: HTTP 401 ...", "POST URL: timed out after 60s"). urllib is imported
inside the functions: it costs tens of ms, and the agent imports this module on every
request.
"""

import collections
import json
import time

INFO_PATHS = ("/server_info", "/get_server_info")  # newer sglang, then older
BODY_CHARS = 200  # of an error answer's body, in a reason

# One /generate call: output_ids (None when it failed), completion tokens, verify steps
# (meta_info.spec_verify_ct, 0 when absent), latency in seconds, and the error or None.
Answer = collections.namedtuple("Answer", "output_ids tokens verify_ct latency_s error")


def build_opener(api_key=None):
    """Return a urllib opener that ignores http_proxy and friends and, given `api_key`,
    sends `Authorization: Bearer KEY` to every path but /health* and /metrics."""
    import urllib.parse
    import urllib.request

    from .api_key import is_protected

    class BearerAuth(urllib.request.BaseHandler):
        """Adds the server's API key to the requests its middleware checks."""

        def http_request(self, request):
            path = urllib.parse.urlsplit(request.full_url).path or "/"
            if api_key and is_protected(path):
                request.add_unredirected_header("Authorization", "Bearer " + api_key)
            return request

        https_request = http_request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), BearerAuth())


def _one_line(text, limit=BODY_CHARS):
    """Return `text` with its whitespace runs collapsed to single spaces, cut to `limit`."""
    return " ".join(str(text).split())[:limit]


def call(opener, url, timeout_s, payload=None):
    """GET `url` (or POST `payload` as JSON); return (HTTP status or None, body bytes,
    error or None). An HTTP error status is an answer (its body is kept); no answer at all
    (refused, timed out, cut off) is (None, b"", "VERB URL: reason")."""
    import http.client
    import socket
    import urllib.error
    import urllib.request

    verb = "GET" if payload is None else "POST"
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=verb)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with opener.open(request, timeout=timeout_s) as resp:
            return resp.status, resp.read(), None
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read()
        except (OSError, http.client.HTTPException):
            body = b""
        return exc.code, body, None
    except (socket.timeout, TimeoutError):
        reason = "timed out after %gs" % timeout_s
    except urllib.error.URLError as exc:
        timed_out = isinstance(exc.reason, (socket.timeout, TimeoutError))
        reason = "timed out after %gs" % timeout_s if timed_out else str(exc.reason)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        reason = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    return None, b"", "%s %s: %s" % (verb, url, _one_line(reason))


def generate(opener, url, prompt, max_new_tokens, timeout_s):
    """POST `prompt` ({"input_ids": [...]} or {"text": ...}) to `url` (.../generate) greedily,
    ignoring EOS; return an Answer.

    OK: HTTP 200 with a JSON object (or a list: its first element) holding output_ids (a
    list of ints) and meta_info.completion_tokens; anything else is an Answer with `error`.
    """
    sampling = {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True}
    started = time.monotonic()
    status, raw, error = call(opener, url, timeout_s, dict(prompt, sampling_params=sampling))
    latency_s = time.monotonic() - started
    if error is None:
        ids, tokens, verify_ct, error = _read_answer(url, status, raw)
        if error is None:
            return Answer(ids, tokens, verify_ct, latency_s, None)
    return Answer(None, 0, 0, latency_s, error)


def _read_answer(url, status, raw):
    """Return (output_ids, completion tokens, verify_ct, None) from a /generate answer, or
    (None, 0, 0, why) when it is no good answer."""
    text = raw.decode("utf-8", "replace")
    where = "POST %s: " % url
    if status != 200:
        return None, 0, 0, where + "HTTP %s %s%s" % (status, _one_line(text), auth_hint(status))
    try:
        body = json.loads(text)
    except ValueError:
        return None, 0, 0, where + "the answer is not JSON: %s" % _one_line(text)
    if isinstance(body, list):
        body = body[0] if body else None
    if not isinstance(body, dict):
        return None, 0, 0, where + "expected a JSON object, got %s" % type(body).__name__
    ids = body.get("output_ids")
    if not isinstance(ids, list) or not all(_is_int(i) for i in ids):
        return None, 0, 0, where + "no output_ids in the answer (keys %s)" % sorted(body)[:20]
    meta = body.get("meta_info")
    meta = meta if isinstance(meta, dict) else {}
    tokens = meta.get("completion_tokens")
    if not _is_int(tokens):
        return None, 0, 0, where + "no meta_info.completion_tokens in the answer"
    verify_ct = meta.get("spec_verify_ct")  # sglang leaves it out when it is 0
    return ids, tokens, verify_ct if _is_int(verify_ct) else 0, None


def auth_hint(status):
    """Return what a 401 means for the inventory ("" for any other status)."""
    if status != 401:
        return ""
    return (
        ": the server requires an API key (set smoke.api_key_file or smoke.api_key_env in "
        "the inventory), or refused the one given"
    )


def _is_int(value):
    """True for a JSON integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def get_text(opener, url, timeout_s, limit_chars):
    """GET `url`; return (its text cut to limit_chars, None) on HTTP 200, else
    (None, "GET URL: HTTP n" or the reason it got no answer)."""
    status, raw, error = call(opener, url, timeout_s)
    if error is not None:
        return None, error
    if status != 200:
        return None, "GET %s: HTTP %s%s" % (url, status, auth_hint(status))
    return raw.decode("utf-8", "replace")[:limit_chars], None


def server_algorithm(opener, server_url, timeout_s):
    """Return the speculative_algorithm that GET /server_info (on 404: /get_server_info)
    reports; None when the server does not speculate ("NONE", "" or absent) or gives no
    readable answer."""
    for path in INFO_PATHS:
        status, raw, _ = call(opener, server_url + path, timeout_s)
        if status == 404:
            continue
        if status != 200:
            return None
        try:
            info = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            return None
        algorithm = info.get("speculative_algorithm") if isinstance(info, dict) else None
        if algorithm is None or str(algorithm).strip().upper() in ("", "NONE"):
            return None
        return str(algorithm)
    return None
