"""One GET of a service's health URL, answered by its HTTP status: what the health op's wait
and the services op (`status`) ask, from the host, of the host's own server.

Deliberately not urllib.request: importing it (http.client, email, ssl, tempfile) cost
≈ 25 ms of CPU in every agent on every push (bench/NOTES.md, "session 10"), more than a
health wait on a server that is already up. An http:// URL is asked over a bare socket (an
HTTP/1.1 GET with `Connection: close`, one status line read); https:// goes through
http.client, imported only then. No proxy is used (the server is the host's own), and a
redirect is not followed: a 3xx comes back as that status, like any other answer that is
not 200.
"""

import socket
import urllib.parse


def get_status(url, timeout_s):
    """Return the status code `url` answers one GET with (200, 503, ...).

    Raises OSError when nothing answers (refused, timed out, reset; its text says which)
    and ValueError for a URL that is not http(s) or an answer that is not HTTP.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL: %s" % url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    host, port = parts.hostname, parts.port  # .port raises ValueError for a bad one
    if parts.scheme == "https":
        return _https_status(host, port, target, timeout_s)
    authority = parts.netloc.rpartition("@")[2]  # the Host header carries no user info
    request = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, authority)
    with socket.create_connection((host, port or 80), timeout=timeout_s) as sock:
        sock.sendall(request.encode("ascii"))  # UnicodeEncodeError is a ValueError
        with sock.makefile("rb") as answer:
            line = answer.readline(1024)
    return status_of(line)


def status_of(line):
    """The status code of an HTTP status line (b"HTTP/1.1 200 OK\\r\\n" -> 200).

    Raises ConnectionResetError for an empty line (the server hung up without answering)
    and ValueError for one that is not an HTTP status line.
    """
    if not line:
        raise ConnectionResetError("the server closed the connection without an answer")
    version, _, rest = line.decode("latin-1").partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/") or not code.isdigit() or rest[3:4] not in ("", " ", "\r"):
        raise ValueError("not an HTTP answer: %r" % line[:80])
    return int(code)


def _https_status(host, port, target, timeout_s):
    """get_status for https://, through http.client (the certificate is verified)."""
    import http.client  # here: only an https health URL pays for it

    conn = http.client.HTTPSConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", target)
        return conn.getresponse().status
    except http.client.HTTPException as exc:  # not an OSError: BadStatusLine and friends
        raise ValueError("not an HTTP answer: %s" % (exc,)) from None
    finally:
        conn.close()
