"""What the model reads: compact JSON results, and argument errors as one sentence naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

from mcp_server.results import argument_error, compact_json
from tests.mcp_server.mcp_helpers import connect


@pytest.mark.anyio
async def test_results_are_compact_json_of_the_structured_content(joinable_ws: Path) -> None:
    async with connect(roots=(joinable_ws,)) as client:
        for tool, args in (("list_passes", {}), ("attribute", {"run_dir": "h200", "top_k": 3}),
                           ("list_runs", {})):
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content[0].text
            [content] = result.content
            text = content.text
            assert "\n" not in text and ": " not in text.split('"')[0]
            assert json.loads(text) == result.structured_content
            assert text == json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
            # what indentation used to cost on this result
            assert len(json.dumps(result.structured_content, indent=2)) > 1.15 * len(text), tool


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "expected"), [
    ("list_runs", {"limit": 0},
     "list_runs: argument 'limit' should be greater than or equal to 1 (got 0); pass an integer >= 1 and <= 50"),
    ("get_operator", {"profile": "p.json"}, "get_operator: argument 'operator' is required; pass a string ("),
    ("attribute", {"top_k": "many"}, "argument 'top_k' should be a valid integer"),
    ("capture", {"workload": "m.py", "compile_mode": "fast"},
     "capture: argument 'compile_mode' should be 'eager', 'default', 'max-autotune' or 'reduce-overhead' "
     "(got 'fast'); pass one of \"eager\", \"default\""),
    ("apply_pass", {"workload": "m.py", "passes": "sdpa"},
     "apply_pass: argument 'passes' should be a valid list (got 'sdpa'); pass a list of strings"),
], ids=["bound", "missing", "type", "choice", "list"])
async def test_argument_errors_are_one_sentence_with_the_fix(workspace: Path, tool: str, args: dict,
                                                             expected: str) -> None:
    async with connect(roots=(workspace,)) as client:
        result = await client.call_tool(tool, args)
    assert result.is_error
    text = result.content[0].text
    assert expected in text
    assert "\n" not in text and "pydantic" not in text and "http" not in text
    assert text.endswith(".") and text.count("; pass ") == 1


def test_several_bad_arguments_share_one_sentence() -> None:
    class Args(BaseModel):
        top_k: int = Field(ge=1, le=5, description="Rows to show.")
        mode: str

    with pytest.raises(ValidationError) as info:
        Args.model_validate({"top_k": 9})
    text = argument_error("report", info.value, Args.model_json_schema())
    assert text == ("report: argument 'top_k' should be less than or equal to 5 (got 9); pass an integer >= 1 "
                    "and <= 5 (Rows to show); argument 'mode' is required; pass a string.")


def test_compact_json_leaves_plain_text_alone() -> None:
    assert compact_json('{\n  "a": [1,\n 2]\n}') == '{"a":[1,2]}'
    assert compact_json("not json: keep") == "not json: keep"
    assert compact_json('"été"') == '"été"'
