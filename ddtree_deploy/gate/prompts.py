"""The gate's prompts: a JSONL file of {"input_ids": [...]} or {"text": "..."} objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Prompt = dict[str, Any]


def check_prompt(prompt: Any) -> str | None:
    """Why `prompt` is not a gate prompt (exactly one of a non-empty input_ids list of
    non-negative ints or a non-empty text string), or None when it is one."""
    if not isinstance(prompt, dict) or set(prompt) not in ({"input_ids"}, {"text"}):
        return 'expected an object with exactly one key, "input_ids" or "text"'
    ids, text = prompt.get("input_ids"), prompt.get("text")
    if "input_ids" in prompt:
        valid = isinstance(ids, list) and ids and all(type(t) is int and t >= 0 for t in ids)
        return None if valid else "input_ids must be a non-empty list of token ids (ints >= 0)"
    return None if isinstance(text, str) and text else "text must be a non-empty string"


def parse_prompts(text: str, where: str) -> tuple[Prompt, ...]:
    """Return the prompts of JSONL `text` (blank lines skipped); raises ValueError naming
    `where:line` and the problem. At least one prompt is required."""
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            prompt = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where}:{number}: not JSON: {exc}") from None
        problem = check_prompt(prompt)
        if problem:
            raise ValueError(f"{where}:{number}: {problem}")
        prompts.append(prompt)
    if not prompts:
        raise ValueError(f"{where}: no prompts (one JSON object per line)")
    return tuple(prompts)


def read_prompts(path: Path) -> tuple[Prompt, ...]:
    """Return the prompts of the JSONL file at `path`; raises ValueError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the gate prompts: {exc}") from None
    return parse_prompts(text, str(path))
