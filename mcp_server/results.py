"""What a tool call sends back: compact JSON text, and argument errors in one readable sentence.

The SDK writes a tool's result text as indented JSON (about 30% more tokens than compact for the
same object) and reports invalid arguments as pydantic's multi-line dump with a documentation URL.
:class:`OprofServer` keeps the SDK's validation and structured content and rewrites only those two
texts::

    {"runs": [{"run_dir": "a"}], "total": 1}        instead of   {\\n  "runs": [\\n    {\\n ...
    list_runs: argument 'limit' should be greater than or equal to 1 (got 0); pass an integer >= 1 and <= 100.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

__all__ = ["OprofServer", "argument_error", "compact_json"]

_REPR_LIMIT = 60  # characters of a rejected value quoted back
_DESCRIPTION_LIMIT = 120  # characters of the argument's description quoted as the hint


def compact_json(text: str) -> str:
    """``text`` re-serialised without indentation when it is JSON, else unchanged."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _prop_schema(schema: dict[str, Any], name: str) -> dict[str, Any]:
    prop = dict(schema.get("properties", {}).get(name, {}))
    options = [o for o in prop.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:  # Optional[X]: describe X
        prop = {**prop, **options[0]}
    ref = prop.get("$ref", "")
    if ref.startswith("#/$defs/"):
        prop = {**prop, **schema.get("$defs", {}).get(ref.rsplit("/", 1)[1], {})}
    return prop


def _expected(prop: dict[str, Any]) -> str:
    """What a valid value of ``prop`` looks like, in words ("an integer >= 1 and <= 100")."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    kind = prop.get("type")
    words = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
             "array": "a list", "object": "an object"}.get(kind if isinstance(kind, str) else "", "a valid value")
    bounds = [f"{op} {prop[key]}" for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                 ("maximum", "<="), ("exclusiveMaximum", "<")) if key in prop]
    if kind == "array" and isinstance(prop.get("items"), dict):
        item = {"integer": "integers", "number": "numbers", "string": "strings"}.get(prop["items"].get("type"))
        words = f"a list of {item}" if item else "a list"
    text = words + (" " + " and ".join(bounds) if bounds else "")
    description = str(prop.get("description", "")).rstrip(".")
    if len(description) > _DESCRIPTION_LIMIT:
        description = description[:_DESCRIPTION_LIMIT].rsplit(" ", 1)[0] + "..."
    return f"{text} ({description})" if description else text


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT - 3] + "..."


def argument_error(tool: str, err: ValidationError, schema: dict[str, Any]) -> str:
    """One sentence naming each rejected argument of ``tool`` and what to pass instead."""
    allowed = sorted(schema.get("properties", {}))
    parts: list[str] = []
    for e in err.errors(include_url=False):
        loc = [str(p) for p in e["loc"]]
        name = loc[0] if loc else "?"
        where = ".".join(loc) or "the arguments"
        hint = _expected(_prop_schema(schema, name))
        if e["type"] == "missing":
            parts.append(f"argument '{where}' is required; pass {hint}")
        elif e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            parts.append(f"'{where}' is not an argument of {tool}; use only {', '.join(allowed) or 'none'}")
        else:
            msg = str(e["msg"])
            msg = msg[len("Input "):] if msg.startswith("Input ") else msg[:1].lower() + msg[1:]
            parts.append(f"argument '{where}' {msg} (got {_quote(e.get('input'))}); pass {hint}")
    return f"{tool}: " + "; ".join(dict.fromkeys(parts)) + "."


class OprofServer(MCPServer):
    """``MCPServer`` whose tool results are compact JSON and whose argument errors are one sentence."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as err:
            if isinstance(err.__cause__, ValidationError) and not isinstance(err, UnexpectedToolError):
                tool = self._tool_manager.get_tool(name)
                schema = tool.parameters if tool is not None else {}
                # the cause stays the ValidationError: the SDK then logs field names only
                raise ToolError(argument_error(name, err.__cause__, schema)) from err.__cause__
            raise
        if isinstance(result, CallToolResult):
            result.content = [TextContent(type="text", text=compact_json(c.text)) if isinstance(c, TextContent)
                              else c for c in result.content]
        return result
