"""Multi-rank runs through the MCP tools: capture passes the rank count on, attribute takes the run whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiler_core.rundir import RankEntry, RanksManifest, rank_dir, write_ranks_manifest
from tests.mcp_server.mcp_helpers import JOINABLE_FILES, call_ok, connect
from tests.mcp_server.test_mcp_capture import FakePipeline

pytestmark = pytest.mark.anyio


@pytest.fixture
def two_rank_ws(workspace: Path, joinable: Path) -> Path:
    """A two-rank run directory whose ranks each hold the real H200 capture, and its ranks manifest."""
    run = workspace / "ddp"
    for r in (0, 1):
        rank_dir(run, r).mkdir(parents=True)
        for name in JOINABLE_FILES:
            shutil.copy(joinable / name, rank_dir(run, r) / name)
    write_ranks_manifest(run, RanksManifest(operator_profiler="0.1.0", created_at="2026-11-29T08:00:00Z",
                                            workload="ddp.py", world_size=2, status="complete",
                                            ranks=[RankEntry(rank=r, dir=f"rank{r}", status="complete")
                                                   for r in (0, 1)]))
    return workspace


async def test_attribute_takes_a_multi_rank_run_whole(two_rank_ws: Path) -> None:
    async with connect(roots=(two_rank_ws,)) as client:
        out = await call_ok(client, "attribute", {"run_dir": "ddp", "top_k": 3})
    run = (two_rank_ws / "ddp").resolve()
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    assert out["profile"] == str(run / "rank0" / "profile.json")
    assert out["merged"] == str(run / "ranks.json")
    merged = json.loads((run / "ranks.json").read_text())
    assert merged["world_size"] == 2
    for row in out["ranks"]:
        profile = json.loads(Path(row["profile"]).read_text())
        assert row["kernel_count"] == len(profile["kernels"]) == 44
        assert (profile["capture"]["rank"], profile["capture"]["world_size"]) == (row["rank"], 2)
    assert out["kernel_count"] == 44 and len(out["top_operators"]) == 3


async def test_attribute_of_a_single_capture_lists_no_ranks(joinable_ws: Path) -> None:
    async with connect(roots=(joinable_ws,)) as client:
        out = await call_ok(client, "attribute", {"run_dir": "h200"})
    assert out["ranks"] is None and out["merged"] is None


async def test_capture_passes_the_rank_count_to_the_capture(workspace: Path) -> None:
    (workspace / "model.py").write_text("def get_model_and_inputs(device='cuda'):\n    raise NotImplementedError\n")
    fake = FakePipeline()
    async with connect(roots=(workspace,), capture_fn=fake) as client:
        status = await call_ok(client, "capture", {"workload": "model.py", "ranks": 2, "wait_s": 10})
        assert status["state"] == "succeeded", status
        single = await call_ok(client, "capture", {"workload": "model.py", "wait_s": 10})
        assert single["state"] == "succeeded", single
    (_, config), (_, default) = fake.calls
    assert config.ranks == 2 and default.ranks is None
