"""``get_roofline`` and ``get_modules`` on the shipped H200 GPT-2 capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = pytest.mark.anyio
GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.fixture(scope="module")
def gpt2_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import write_profile

    ws = tmp_path_factory.mktemp("gpt2")
    write_profile(ws / "profile.json", attribute_run(GPT2))
    return ws


async def test_get_roofline_ranks_operators_by_headroom(gpt2_ws: Path) -> None:
    async with connect(roots=(gpt2_ws,)) as client:
        out = await call_ok(client, "get_roofline", {"profile": "profile.json", "top_k": 5})
    assert out["chip"] == "h200_sxm" and out["roofs_tflops"]["bf16_tensor"] == 790.0  # measured
    assert out["bandwidth_gbs"] == 4300
    heads = [r["headroom_us"] for r in out["operators"]]
    assert len(heads) == 5 and heads == sorted(heads, reverse=True)
    lm_head = out["operators"][0]
    assert lm_head["module"] == "wte" and lm_head["flops"] == 2 * 512 * 768 * 50257  # the tied LM head
    assert lm_head["flops_from"] == "modelled" and lm_head["roof"] == "fp32" and lm_head["bound"] == "compute"
    assert out["classes"][0]["op_class"] == "gemm" and out["showing"].startswith("5 of ")


async def test_get_modules_lists_the_tree_and_the_layers(gpt2_ws: Path) -> None:
    async with connect(roots=(gpt2_ws,)) as client:
        out = await call_ok(client, "get_modules", {"profile": "profile.json", "max_depth": 2, "limit": 30})
        bad = await call_err(client, "get_modules", {"profile": "missing.json"})
    assert out["coverage_pct"] == 100.0
    assert [m["path"] for m in out["modules"][:3]] == ["", "h", "h.0"]
    assert out["modules"][0]["share_pct"] == 100.0
    layers = next(g for g in out["repeated_blocks"] if g["parent"] == "h")
    assert [b["path"] for b in layers["blocks"]] == [f"h.{i}" for i in range(12)] and layers["outliers"] == []
    assert "missing.json" in bad
