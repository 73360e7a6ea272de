"""Host facts as events and tables may show them: the serve file, redacted."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.stages.serve_file import describe_serve_text, parse_serve_file, redact_args


def describe_serve_fact(serve: dict[str, Any]) -> dict[str, Any]:
    """Return the host's serve-file fact without its raw text (it may hold an api key).

    Adds `flags` (one redacted line, or `PATH: (absent)`) and `args` (the arguments with
    secret values replaced by ***); every other key (path, sha256, mode...) is kept.
    """
    shown = {k: v for k, v in serve.items() if k != "text"}
    text = serve.get("text")
    shown["flags"] = describe_serve_text(serve["path"], text)
    shown["args"] = redact_args(parse_serve_file(text)[0]) if text else []
    return shown
