"""The server's API key, read on the host: from a file (its first line) or an environment
variable of the agent, named by the inventory's [smoke] api_key_file / api_key_env.

The key stays on the host: it is sent only to the local server, as `Authorization: Bearer`,
and every error here names the file or variable, never the key. Stdlib only.
"""

import os

KEY_MAX_BYTES = 4096  # a key file larger than this is no key file


def read_api_key(key_file=None, key_env=None):
    """Return (key or None, error or None): (None, None) when neither is given.

    error names the file or variable and why it gives no key (missing, unreadable, empty).
    """
    if key_file:
        try:
            with open(key_file, "rb") as fh:
                raw = fh.read(KEY_MAX_BYTES + 1)
        except OSError as exc:
            return None, "smoke.api_key_file %s: cannot read: %s" % (key_file, exc.strerror or exc)
        if len(raw) > KEY_MAX_BYTES:
            return None, "smoke.api_key_file %s: larger than %d bytes" % (key_file, KEY_MAX_BYTES)
        lines = raw.decode("utf-8", "replace").splitlines()
        key = lines[0].strip() if lines else ""
        if not key:
            return None, "smoke.api_key_file %s: the first line is empty" % key_file
        return key, None
    if key_env:
        key = os.environ.get(key_env, "").strip()
        if not key:
            return None, "smoke.api_key_env %s: not set (or empty) in the agent's environment" % (
                key_env,
            )
        return key, None
    return None, None


def is_protected(path):
    """True for a server path that needs the key: all but /health* and /metrics* (what
    sglang's API-key middleware leaves open)."""
    return not (path.startswith("/health") or path.startswith("/metrics"))


def redact(text, key):
    """Return `text` with every occurrence of `key` replaced (also JSON-escaped forms)."""
    if not key or not text:
        return text
    import json

    for form in (key, json.dumps(key)[1:-1]):
        text = text.replace(form, "[redacted]")
    return text
