"""Stream a large Kineto trace in bounded memory: whole events, a few MB at a time.

Two readers, the first that fits the file wins:

* **framed** (fast): torch.profiler pretty-prints one event per block, each opening and
  closing brace on a line of its own at the same indentation::

        "traceEvents": [
          {
            "ph": "X", "cat": "kernel", ...
          },
          {

  so ``"\\n  },\\n  {"`` can only separate two events (JSON strings hold no raw newline).
  The reader cuts the byte stream there and hands each ~4 MB block to orjson, which
  allocates far fewer objects than a token-level parser (it shares repeated keys).
  A block that is not a valid list of events means the layout is not what it looks like:
  the reader gives up (``NotFramable``) and the caller starts over with ijson.
* **ijson**: token-level and layout-agnostic (compact JSON, any key order), several
  times slower; also the one that reports a truncated or corrupt file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

import ijson
import orjson

# Bytes per framed block; 0 turns framing off (tests use it to force the ijson reader).
FRAME_BYTES = 4 << 20

_HEAD_LIMIT_BYTES = 1 << 20  # Kineto's metadata before "traceEvents" is a few kB
_FIRST_EVENT_BYTES = 64  # enough to see how the first event is indented
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_FIRST_EVENT = re.compile(rb"[ \t\r]*\n([ \t]*)\{")
_IJSON_BATCH_EVENTS = 50_000  # parse a batch, then convert it: faster than alternating per event

Opener = Callable[[], IO[bytes]]


class NotFramable(Exception):
    """The file's layout does not allow cutting it at event boundaries; use ijson."""


def framed_batches(f: IO[bytes], frame_bytes: int, metadata_keys: frozenset[str]) -> tuple[
    dict[str, Any], Iterator[list[Any]]
]:
    """Metadata before ``traceEvents``, and the events in blocks of about ``frame_bytes``."""
    head = b""
    while (key := _EVENTS_KEY.search(head)) is None or len(head) - key.end() < _FIRST_EVENT_BYTES:
        data = f.read(frame_bytes)
        if not data or len(head) > _HEAD_LIMIT_BYTES:
            break
        head += data
    if key is None:
        raise NotFramable("no traceEvents key near the start")
    try:
        # Closing the array and the object must give valid JSON: proves the key is at top level.
        doc = orjson.loads(head[: key.end()] + b"]}")
    except orjson.JSONDecodeError as err:
        raise NotFramable("the head is not a JSON object prefix") from err
    if not isinstance(doc, dict) or doc.get("traceEvents") != []:
        raise NotFramable("traceEvents is not a top-level list")
    first = _FIRST_EVENT.match(head, key.end())
    if first is None:
        raise NotFramable("events are not one per indented block")
    indent = first.group(1)
    metadata = {k: v for k, v in doc.items() if k in metadata_keys}
    blocks = _blocks(f, head[key.end():], indent, frame_bytes, metadata, metadata_keys)
    return metadata, blocks


def _blocks(f: IO[bytes], buffer: bytes, indent: bytes, frame_bytes: int, metadata: dict[str, Any],
            metadata_keys: frozenset[str]) -> Iterator[list[Any]]:
    close = b"\n" + indent + b"}"
    separator = close + b",\n" + indent + b"{"
    while data := f.read(frame_bytes):
        buffer += data
        cut = buffer.rfind(separator)
        if cut < 0:
            if len(buffer) > 4 * frame_bytes:
                raise NotFramable("no event separator in a whole block")
            continue
        end = cut + len(close)
        yield _parse_list(b"[" + buffer[:end] + b"]")
        buffer = buffer[end + len(separator) - len(close) - 1:]  # from the next event's "{"
    # The tail holds the last events, the array's end and any keys after it.
    try:
        tail = orjson.loads(b'{"traceEvents": [' + buffer)
    except orjson.JSONDecodeError as err:
        raise NotFramable("the tail does not close the document") from err
    metadata.update((k, v) for k, v in tail.items() if k in metadata_keys and k not in metadata)
    yield tail["traceEvents"]


def _parse_list(block: bytes) -> list[Any]:
    try:
        events = orjson.loads(block)
    except orjson.JSONDecodeError as err:
        raise NotFramable("a block is not a list of whole events") from err
    return events  # type: ignore[no-any-return]


def ijson_batches(backend: Any, opener: Opener) -> Iterator[list[Any]]:
    """The events of ``traceEvents``, token by token, in lists of up to 50k."""
    with opener() as f:
        items = backend.items(f, "traceEvents.item", use_float=True)
        while batch := list(islice(items, _IJSON_BATCH_EVENTS)):
            yield batch


def ijson_head(backend: Any, f: IO[bytes], metadata_keys: frozenset[str]) -> tuple[dict[str, Any], str]:
    """Build the top-level values before ``traceEvents`` (Kineto's metadata), token by token.

    Returns the metadata and what was found: ``"events"`` (traceEvents is a list),
    ``"not-a-list"``, ``"missing"`` (document ended first) or ``"not-an-object"``.
    """
    parser = backend.parse(f, use_float=True)
    first = next(parser, None)
    if first is None or first[1] != "start_map":
        return {}, "not-an-object"
    metadata: dict[str, Any] = {}
    key: str | None = None
    builder: ijson.common.ObjectBuilder | None = None
    depth = 0
    for _prefix, event, value in parser:
        if builder is None:
            if event == "end_map":
                return metadata, "missing"
            key = value
            if key == "traceEvents":
                found = next(parser, (None, None, None))[1] == "start_array"
                return metadata, "events" if found else "not-a-list"
            builder = ijson.common.ObjectBuilder()
            continue
        builder.event(event, value)
        depth += event in ("start_map", "start_array")
        depth -= event in ("end_map", "end_array")
        if depth == 0:
            if key in metadata_keys:
                metadata[key] = builder.value
            builder = None
    return metadata, "missing"
