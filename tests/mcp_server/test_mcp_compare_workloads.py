"""The compare tool refuses two different workloads, as the CLI does, unless told force=true."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"


@pytest.mark.slow
@pytest.mark.anyio
async def test_gpt2_against_the_attention_layer_is_refused_then_forced(tmp_path: Path) -> None:
    for name in ("gpt2", "sdpa_attention"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.json").write_text(attribute_run(CAPTURES / name / "baseline").model_dump_json())
    args = {"baseline": "gpt2/profile.json", "optimized": "sdpa_attention/profile.json"}
    async with connect(roots=(tmp_path,)) as client:
        text = await call_err(client, "compare", args)
        assert "measure different workloads" in text and "gpt2.py vs sdpa_attention.py" in text
        assert "force=true" in text
        assert not (tmp_path / "sdpa_attention" / "comparison.json").exists()  # nothing written on refusal
        forced = await call_ok(client, "compare", {**args, "force": True})
    assert Path(forced["comparison_file"]).is_file()


@pytest.mark.anyio
async def test_gate_judges_different_workloads_not_comparable(tmp_path: Path) -> None:
    for name in ("gpt2", "sdpa_attention"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.json").write_text(attribute_run(CAPTURES / name / "baseline").model_dump_json())
    args = {"baseline": "gpt2/profile.json", "optimized": "sdpa_attention/profile.json", "gate_pct": 5}
    async with connect(roots=(tmp_path,)) as client:
        done = await call_ok(client, "compare", args)
        plain = await call_ok(client, "compare", {**args, "gate_pct": None, "force": True})
    assert (done["gate"]["outcome"], done["gate"]["exit_code"]) == ("not_comparable", 4)
    assert "workload differs" in done["gate"]["reason"] and plain.get("gate") is None
