"""compare and report over MCP on the shipped H200 captures: the verdict leads with wall time per step.

The run directories are passed as they are (no profile.json yet: attributed on the way), and
the wall times come from the walltime.json shipped beside baseline/ and optimized/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp_server.mcp_helpers import call_ok, connect
from tests.report.test_end_to_end_shipped import shipped_copy

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def shipped_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shipped_ws")
    shipped_copy(root, "sdpa_attention", "baseline", "optimized")
    shipped_copy(root, "tv_resnet18", "baseline", "optimized")
    return root


@pytest.mark.parametrize(("name", "verdict", "kernel_verdict", "why"), [
    ("sdpa_attention", "unchanged", "faster", "host-bound or launch-bound"),
    ("tv_resnet18", "faster", "slower", "outside the kernels"),
], ids=["host_bound_attention", "cuda_graphs_resnet"])
@pytest.mark.slow
async def test_compare_and_report_lead_with_wall_time(shipped_ws: Path, name: str, verdict: str,
                                                      kernel_verdict: str, why: str) -> None:
    async with connect(roots=(shipped_ws,)) as client:
        compared = await call_ok(client, "compare", {"baseline": f"{name}/baseline",
                                                     "optimized": f"{name}/optimized"})
        reported = await call_ok(client, "report", {"profile": f"{name}/optimized",
                                                    "baseline": f"{name}/baseline", "include_findings": False})
    e2e = compared["end_to_end"]
    assert (e2e["verdict"], e2e["verdict_basis"], e2e["kernel_verdict"]) == (verdict, "wall_time", kernel_verdict)
    assert compared["verdict"] == kernel_verdict  # the top-level figures stay profiled kernel time
    assert e2e["agree"] is False and why in e2e["headline"]
    assert e2e["speedup"] == pytest.approx(e2e["base_wall_ms"] / e2e["opt_wall_ms"])
    assert e2e["source"] == str((shipped_ws / name).resolve())
    assert compared["baseline"] == str((shipped_ws / name / "baseline" / "profile.json").resolve())
    assert reported["comparison"]["end_to_end"] == e2e
    html = Path(reported["html"]).read_text()
    assert f"<b>{verdict.upper()}</b> end to end" in html and "no end-to-end wall time measured" not in html


@pytest.mark.parametrize(("name", "pct", "outcome", "exit_code"), [
    ("sdpa_attention", 5.0, "unchanged", 3),
    ("tv_resnet18", 5.0, "faster", 0),
], ids=["host_bound_attention", "cuda_graphs_resnet"])
async def test_compare_gate_matches_the_cli(shipped_ws: Path, name: str, pct: float, outcome: str,
                                            exit_code: int) -> None:
    async with connect(roots=(shipped_ws,)) as client:
        compared = await call_ok(client, "compare", {"baseline": f"{name}/baseline",
                                                     "optimized": f"{name}/optimized", "gate_pct": pct})
    gate = compared["gate"]
    assert (gate["outcome"], gate["exit_code"], gate["basis"]) == (outcome, exit_code, "wall_time")
    assert gate["limit_pct"] == pct and gate["reason"].startswith(outcome.upper())
