"""How much of a value an error message may show: a short prefix, never the whole of a huge one.

A message names the thing at fault, but a 3 MB operator name or a 4,000-character path echoed
whole makes a 3 MB error (and a terminal or a model context full of it). Two helpers:

* :func:`shown` for a value a message quotes: ``repr`` of at most ``limit`` characters, with
  how long the whole was::

      shown("Q" * 5000)  -> "'QQQQ...QQQQ'... (5000 characters)"

* :func:`clip_message` for a finished message, the last step before the CLI prints it or the
  MCP server returns it: any run of more than ``TOKEN_CHARS`` non-blank characters (a path, a
  name) keeps its first ``KEEP_CHARS``, and a message still longer than ``MESSAGE_CHARS`` keeps
  its head and its tail (where the fix is).
"""

from __future__ import annotations

import re

KEEP_CHARS = 100
TOKEN_CHARS = 240
MESSAGE_CHARS = 1500
_LONG_TOKEN = re.compile(rf"\S{{{TOKEN_CHARS + 1},}}")


def shown(value: object, limit: int = KEEP_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters of the value, saying how long it was."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _clip_token(match: re.Match[str]) -> str:
    token = match.group(0)
    end = token[-1] if token[-1] in ":,;" else ""  # the punctuation after a path stays
    return f"{token[:KEEP_CHARS]}...({len(token) - len(end)} characters){end}"


def clip_message(text: str) -> str:
    """``text`` with every over-long token cut to a prefix, and the whole bounded (head and tail kept)."""
    if len(text) <= TOKEN_CHARS:
        return text
    text = _LONG_TOKEN.sub(_clip_token, text)
    if len(text) > MESSAGE_CHARS:
        head, tail = text[:MESSAGE_CHARS - 400], text[-300:]
        text = f"{head} ...({len(text) - len(head) - len(tail)} characters) {tail}"
    return text
