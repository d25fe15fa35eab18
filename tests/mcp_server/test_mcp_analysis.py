"""``diagnose``, ``compare``, ``report`` on the real H200 pair (FP32 baseline; BF16, fused QKV, SDPA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler_core.analysis import Comparison, FindingsReport
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = pytest.mark.anyio
PAIR = Path(__file__).resolve().parents[1] / "data" / "h200_pair"


async def test_diagnose_lists_findings_and_writes_them(pair_ws: Path) -> None:
    async with connect(roots=(pair_ws,)) as client:
        top2 = await call_ok(client, "diagnose", {"profile": "base/profile.json", "top_k": 2})
        every = await call_ok(client, "diagnose", {"profile": "base/profile.json", "top_k": 30})
    written = FindingsReport.model_validate_json(Path(top2["findings_file"]).read_text())
    assert top2["findings_file"] == str((pair_ws / "base" / "findings.json").resolve())
    assert [f["rule_id"] for f in top2["findings"]] == [f.rule_id for f in written.findings[:2]]
    assert top2["showing"].startswith(f"2 of {len(written.findings)} findings")
    bounds = [f["gain_bound_pct"] for f in every["findings"]]
    assert len(bounds) == len(written.findings) and bounds == sorted(bounds, reverse=True)
    # The rules the analysis golden file expects on this baseline all fire through the tool too.
    expected = json.loads((PAIR / "expected_findings_base.json").read_text())
    assert {f["rule_id"] for f in expected["findings"]} <= {f["rule_id"] for f in every["findings"]}
    tc = next(f for f in every["findings"] if f["rule_id"] == "tensor_core_idle")
    assert tc["licenses"] == "bf16_promotion" and tc["expected_shifts"] == {"tensor_core_active_pct": "up"}
    assert tc["operator_count"] > len(tc["operators"]) == 5


async def test_diagnose_judges_the_roofline_unless_told_not_to(pair_ws: Path) -> None:
    async with connect(roots=(pair_ws,)) as client:
        default = await call_ok(client, "diagnose", {"profile": "base/profile.json", "top_k": 30})
        plain = await call_ok(client, "diagnose", {"profile": "base/profile.json", "top_k": 30,
                                                   "output": "base/findings_plain.json", "roofline": False})
    written = FindingsReport.model_validate_json((pair_ws / "base" / "findings_plain.json").read_text())
    assert "far_below_roofline" in {f["rule_id"] for f in default["findings"]}
    assert "far_below_roofline" not in {f["rule_id"] for f in plain["findings"]} | set(written.rules_run)
    tc, tc_plain = (next(f for f in r["findings"] if f["rule_id"] == "tensor_core_idle") for r in (default, plain))
    assert 0 < tc["gain_bound_pct"] < tc_plain["gain_bound_pct"]  # capped by the bf16 roofline
    (capped,) = FindingsReport.model_validate_json(Path(default["findings_file"]).read_text()).by_rule(
        "tensor_core_idle")
    assert any("bound tightened by the bf16_tensor roofline" in fact for fact in capped.evidence.facts)


async def test_compare_pair(pair_ws: Path) -> None:
    async with connect(roots=(pair_ws,)) as client:
        args = {"baseline": "base/profile.json", "optimized": "opt/profile.json", "top_k": 3}
        out = await call_ok(client, "compare", args)
    full = Comparison.model_validate_json(Path(out["comparison_file"]).read_text())
    assert out["comparison_file"] == str((pair_ws / "opt" / "comparison.json").resolve())
    assert out["verdict"] == full.verdict == "faster" and out["speedup"] == full.speedup > 1.5
    assert out["base_total_us"] == pytest.approx(full.base_total_ns / 1e3, abs=1e-3)
    assert out["comparable"] is full.comparability.comparable
    assert {c["name"] for c in out["checks"]} == {c.name for c in full.comparability.checks}
    assert len(out["operators"]) == 3 and out["operators_showing"].startswith(f"3 of {len(full.operators)}")
    deltas = [abs(r["delta_us"]) for r in out["operators"]]
    assert deltas == sorted(deltas, reverse=True)
    gemm = next(c for c in out["classes"] if c["op_class"] == "gemm")
    assert gemm["opt_us"] < gemm["base_us"]
    assert not any(t.startswith("gpu_time_duration_ns") for c in out["classes"] for t in c["counters"])
    assert any(s["field"] == "tensor_core_active_pct" for s in out["shift_checks"])


async def test_report_writes_html_and_a_bounded_summary(pair_ws: Path) -> None:
    async with connect(roots=(pair_ws,)) as client:
        args = {"profile": "opt/profile.json", "baseline": "base/profile.json", "html": "reports/opt.html",
                "top_k": 3}
        out = await call_ok(client, "report", args)
        plain = await call_ok(client, "report", {"profile": "base/profile.json", "include_findings": False})
    page = Path(out["html"]).read_text()
    assert out["html"] == str((pair_ws / "reports" / "opt.html").resolve())
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert out["comparison"]["verdict"] == "faster" and out["comparison"]["speedup"] > 1.5
    summary = out["summary"]
    assert summary["kernels"] == 20 and len(summary["top_operators"]) == 3
    assert len(json.dumps(summary, separators=(",", ":"))) <= 6144
    assert plain["findings_file"] is None and plain["summary"]["findings"] == []
    assert Path(plain["html"]).name == "report.html"


@pytest.mark.parametrize(("tool", "args", "match"), [
    ("diagnose", {"profile": "nope.json"}, "no such profile.json"),
    ("diagnose", {"profile": "base/kineto.json"}, "invalid profile"),
    ("diagnose", {"profile": "base/profile.json", "output": "/tmp/findings.json"}, "outside the workspace"),
    ("compare", {"baseline": "base/profile.json", "optimized": "/etc/hostname"}, "outside the workspace"),
    ("compare", {"baseline": "base/profile.json", "optimized": "base/logs"}, "holds no timeline"),
    ("report", {"profile": "base/profile.json", "baseline": "missing/profile.json"}, "no such profile.json"),
    ("report", {"profile": "base/profile.json", "html": "base"}, "is a directory"),
], ids=["missing", "not-a-profile", "output-outside", "input-outside", "not-a-run", "missing-baseline",
        "html-dir"])
async def test_analysis_refusals(pair_ws: Path, tool: str, args: dict, match: str) -> None:
    (pair_ws / "base" / "logs").mkdir(exist_ok=True)  # a directory that holds no capture
    async with connect(roots=(pair_ws,)) as client:
        assert match in await call_err(client, tool, args)
