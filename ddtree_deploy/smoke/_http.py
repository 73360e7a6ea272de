"""Shared by the smoke scripts (shipped beside them): HTTP to the server beside the agent.

Every request ignores http_proxy/HTTPS_PROXY and friends (the server is local: urllib would
send even 127.0.0.1 through a proxy), and carries `Authorization: Bearer KEY` on every path
but /health* and /metrics when the host's SmokeSpec names an API key: api_key_file (its first
line) or api_key_env (a variable of the agent's environment). The key is read here, on the
host; errors name the file or variable, and `Suite.secrets` keeps it out of the result line.
Stdlib only.
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

KEY_MAX_BYTES = 4096
AUTH_HINT = (
    "the server requires an API key (set smoke.api_key_file or smoke.api_key_env in the inventory)"
)
REFUSED_HINT = "the server refused the API key from %s"


def read_api_key(spec):
    """Return (key or None, where it came from, error or None) from the SmokeSpec `spec`
    (a dict): ("", "", None) when it names no key. error names the file or variable."""
    key_file, key_env = spec.get("api_key_file"), spec.get("api_key_env")
    if key_file:
        where = "smoke.api_key_file %s" % key_file
        try:
            with open(key_file, "rb") as fh:
                raw = fh.read(KEY_MAX_BYTES + 1)
        except OSError as exc:
            return None, where, "%s: cannot read: %s" % (where, exc.strerror or exc)
        lines = raw[:KEY_MAX_BYTES].decode("utf-8", "replace").splitlines()
        key = lines[0].strip() if lines else ""
        return (key, where, None) if key else (None, where, "%s: the first line is empty" % where)
    if key_env:
        where = "smoke.api_key_env %s" % key_env
        key = os.environ.get(key_env, "").strip()
        return (key, where, None) if key else (None, where, "%s: not set or empty" % where)
    return "", "", None


class LocalHttp:
    """GET/POST JSON to the local server: no proxy, the API key where the server wants it.

    key: the API key ("" for none); where: what it came from (for a refused key's message).
    """

    def __init__(self, key="", where=""):
        self.key, self.where = key, where
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call_json(self, url, timeout_s, payload=None):
        """GET (or POST `payload` as JSON) -> (HTTP status or None, parsed body or text,
        error). A 401 comes back with an error saying what to set in the inventory."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        path = urllib.parse.urlsplit(url).path or "/"
        if self.key and not (path.startswith("/health") or path.startswith("/metrics")):
            request.add_unredirected_header("Authorization", "Bearer " + self.key)
        try:
            with self.opener.open(request, timeout=timeout_s) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (OSError, ValueError) as exc:
            return None, None, "no answer: %s" % (getattr(exc, "reason", exc),)
        text = raw.decode("utf-8", "replace")
        error = ""
        if status == 401:
            hint = REFUSED_HINT % self.where if self.key else AUTH_HINT
            error = "HTTP 401 %s: %s" % (" ".join(text.split())[:80], hint)
        try:
            return status, json.loads(text), error
        except ValueError:
            return status, text, error
