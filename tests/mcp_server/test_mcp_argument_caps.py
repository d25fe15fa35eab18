"""Every string argument of every tool is bounded, and no error echoes more than a short prefix of a value.

A 3 MB operator name used to come back in a 3 MB error after 14 s. Each tool is called with a
value past its argument's bound (refused by validation, at once), and with values inside the
bound that are still wrong (an operator no profile lists, a path that does not exist): the
error the model reads is short either way.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mcp_server.arguments import KEY_CHARS, PATH_CHARS
from tests.mcp_server.mcp_helpers import call_err, connect

ECHO_MAX = 600  # characters of any error text


def _strings(schema: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every string-typed node of an input schema (free text, not enums), with where it is."""
    out: list[tuple[str, dict[str, Any]]] = []
    if schema.get("type") == "string" and "enum" not in schema and "const" not in schema:
        out.append((where, schema))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            out += _strings(sub, where)
    if isinstance(schema.get("items"), dict):
        out += _strings(schema["items"], where + "[]")
    for name, sub in schema.get("properties", {}).items():
        out += _strings(sub, f"{where}.{name}")
    return out


@pytest.mark.anyio
async def test_every_string_argument_has_a_bound(workspace: Path) -> None:
    async with connect(roots=(workspace,)) as client:
        tools = (await client.list_tools()).tools
    found = [(w, s) for t in tools for w, s in _strings(t.input_schema, t.name)]
    assert len(found) >= 20  # the tools take paths, keys and ids
    unbounded = [w for w, s in found if not 0 < s.get("maxLength", 0) <= PATH_CHARS]
    assert not unbounded, f"string arguments without max_length: {unbounded}"


def _huge_args(tool: Any) -> list[dict[str, Any]]:
    """For each top-level string argument of ``tool``: its required arguments, with that one 3 MB long."""
    props = tool.input_schema.get("properties", {})
    required = tool.input_schema.get("required", [])
    strings = [n for n, s in props.items() if _strings(s, n)]
    base = {n: ("cap-0" if n == "job_id" else ["tf32"] if n == "passes" else "x.py") for n in required}
    return [{**base, name: "A" * 3_000_000} for name in strings]


@pytest.mark.anyio
async def test_a_huge_argument_is_refused_at_once_without_its_value(workspace: Path) -> None:
    async with connect(roots=(workspace,)) as client:
        tools = (await client.list_tools()).tools
        calls = [(t.name, args) for t in tools for args in _huge_args(t)]
        assert len(calls) >= 20
        for name, args in calls:
            start = time.monotonic()
            text = await call_err(client, name, args)
            assert time.monotonic() - start < 5, name
            assert len(text) < ECHO_MAX and "A" * 200 not in text, (name, text[:300])


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args"), [
    ("get_operator", {"profile": "base/profile.json", "operator": "Q" * (KEY_CHARS - 1)}),
    ("diagnose", {"profile": "Q" * (PATH_CHARS - 10)}),
    ("attribute", {"kineto": "/" + "Q" * (PATH_CHARS - 10)}),
    ("compare", {"baseline": "base/profile.json", "optimized": "base/" + "Q" * 250}),
])
async def test_a_wrong_value_inside_the_bound_is_echoed_as_a_prefix(pair_ws: Path, tool: str,
                                                                    args: dict[str, Any]) -> None:
    async with connect(roots=(pair_ws,)) as client:
        text = await call_err(client, tool, args)
    assert len(text.replace(str(pair_ws), "")) < ECHO_MAX and "Q" * 200 not in text, text[:400]
