"""Host-supplied text made safe for a terminal: no escape sequence or control character of a
host's reaches the operator's console.

A host's stderr, a smoke suite's output, an exception message: any of it may hold ESC
sequences (an OSC that retitles the terminal or writes the clipboard, a CSI that clears the
screen or moves the cursor), their 8-bit C1 forms (`\\x9b` is CSI on many terminals), a bare
CR that overwrites the line it is quoted in, or Rich markup (`[red]`). `clean_text` drops every
escape sequence whole (so its parameters do not litter the line) and every other C0/C1
control character but newline and tab; `plain` also escapes Rich markup. The sinks call them
(the live view, the event lines, the tables, the summary, its Markdown file, JUnit), and
the CLI's console cleans whatever else it prints with it, as a last guard
(cli/context.py `guard_console`). `--json` is not
cleaned: JSON escapes the bytes (`\\u001b`), and a program reading them gets what the host
said.

Hand-written (a few lines of ECMA-48): Rich's ANSI decoder ends an OSC only at ESC \\, not BEL,
and knows no C1 forms; the strip-ansi packages also stop at 7-bit sequences.
"""

from __future__ import annotations

import re

from rich.markup import escape

_ESCAPES = re.compile(
    r"""
      (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]?           # CSI, 7-bit or C1: params, final byte
    | (?:\x1b[]PX^_]|[\x90\x98\x9d\x9e\x9f])         # OSC, DCS, SOS, PM, APC (7-bit or C1)
      [^\x07\x1b\x9c\n]*                             #   their string, up to the end of line
      (?:\x07|\x1b\\|\x9c)?                          #   BEL or ST ends it
    | \x1b [ -/]* [0-~]?                             # any other ESC sequence (ESC ( B, ESC c)
    | [\x00-\x08\x0b-\x1f\x7f-\x9f]                  # every other C0 (not \t \n), DEL, C1
    """,
    re.VERBOSE,
)


def clean_text(text: str) -> str:
    """`text` without escape sequences or control characters (newline and tab kept); a
    CRLF line end becomes a newline."""
    return _ESCAPES.sub("", text.replace("\r\n", "\n"))


def plain(value: object) -> str:
    """`value` as Rich markup that prints as cleaned plain text (markup escaped)."""
    return escape(clean_text(str(value)))
