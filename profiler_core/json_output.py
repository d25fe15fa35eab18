"""JSON documents as the CLI prints them and the MCP server writes them: pydantic's serializer,
indented, a long listing written a batch at a time, every byte written however short a write is."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any


def json_document(payload: Any) -> bytes:
    """``payload`` as an indented UTF-8 JSON document with its final newline.

    pydantic's serializer, not ``json.dumps``: an indent sends ``json.dumps`` down its pure-Python
    encoder, 8x slower on a comparison of two 100k-kernel profiles (314 MB: 16.6 s against 2.1 s).
    The values are the same; a float below 1e-4 is written out (``0.00001``, not ``1e-05``) and
    characters beyond ASCII stay as they are (UTF-8) instead of ``\\u`` escapes.
    """
    from pydantic_core import to_json

    # a model goes to JSON in one pass (its JSON-mode serialization, without a dump to Python first)
    return to_json(payload, indent=1, fallback=str) + b"\n"


def json_pieces(payload: dict[str, Any], listed: str, items: Iterable[Any], batch: int = 2048) -> Iterator[bytes]:
    """:func:`json_document` of ``payload`` with ``payload[listed]`` the list of ``items``, in pieces:
    the items are serialised a batch at a time, so the document is never whole in memory (two
    1M-kernel profiles' comparison lists 772k operator rows: 3 GB of JSON). ``listed`` is one of
    the payload's own keys."""
    from pydantic_core import to_json

    head = json_document({**payload, listed: []})
    # the key at the top level (indented one space); no JSON string holds a raw newline
    marker = b'\n "' + to_json(listed)[1:-1] + b'": []'
    at = head.index(marker)
    yield head[:at + len(marker) - 1]  # up to the list's "["
    items = iter(items)
    first = True
    while chunk := list(islice(items, batch)):
        # the chunk as a list, one level deeper: "[\n {..},\n {..}\n]" -> "\n  {..},\n  {..}"
        body = to_json(chunk, indent=1, fallback=str)[1:-2].replace(b"\n", b"\n ")
        yield body if first else b"," + body
        first = False
    yield (b"]" if first else b"\n ]") + head[at + len(marker):]


_CHUNK = 1 << 28


def write_all(stream: Any, data: bytes) -> None:
    """Write every byte of ``data`` to the binary ``stream``, a piece at a time: a single write of more
    than 2 GiB to stdout stops at 2 GiB and says so only in its return value (Linux writes at most
    0x7ffff000 bytes a call), which would leave a JSON document cut short."""
    view = memoryview(data)
    while view:
        piece = view[:_CHUNK]
        written = stream.write(piece)
        if written == 0:
            raise OSError("the output took none of the JSON document's bytes")
        view = view[len(piece) if written is None else written:]


def write_json(stream: Any, pieces: Iterable[bytes], *, final_newline: bool = True) -> None:
    """Write the pieces of a document (:func:`json_pieces`) to the binary ``stream``, each whole
    (:func:`write_all`); ``final_newline=False`` leaves the document's last newline out (the bytes of
    ``model_dump_json(indent=1)``)."""
    last: bytes | None = None
    for piece in pieces:
        if last is not None:
            write_all(stream, last)
        last = piece
    if last is not None:
        write_all(stream, last if final_newline else last.removesuffix(b"\n"))
