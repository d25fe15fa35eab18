"""The verdict leads with wall time per step wherever a run pair has it recorded (the shipped H200 captures).

sdpa_attention: kernels 8.71x faster, the step unchanged end to end (0.555 -> 0.550 ms);
tv_resnet18 with CUDA graphs: kernels 0.98x, the step 1.29x faster. A pair the recorded wall
times did not measure (the baseline against another capture) keeps the kernel-time verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.report.end_to_end import end_to_end_for

SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"
runner = CliRunner()
app = load_commands()


def shipped_copy(dest: Path, name: str, *runs: str) -> Path:
    """A copy of one shipped example: the named run directories and the summaries beside them."""
    home = dest / name
    home.mkdir(parents=True)
    for run in runs:
        shutil.copytree(SHIPPED / name / run, home / run)
    for summary in ("walltime.json", "optimize.json"):
        if (SHIPPED / name / summary).exists():
            shutil.copy(SHIPPED / name / summary, home / summary)
    return home


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shipped")
    shipped_copy(root, "sdpa_attention", "baseline", "optimized", "tf32")
    shipped_copy(root, "tv_resnet18", "baseline", "optimized")
    return root


@pytest.mark.parametrize(("name", "verdict", "kernel_verdict", "base_ms", "opt_ms"), [
    ("sdpa_attention", "unchanged", "faster", 0.555, 0.550),
    ("tv_resnet18", "faster", "slower", 1.547, 1.200),
], ids=["host_bound_attention", "cuda_graphs_resnet"])
def test_compare_json_leads_with_wall_time(examples: Path, name: str, verdict: str, kernel_verdict: str,
                                            base_ms: float, opt_ms: float) -> None:
    home = examples / name
    result = runner.invoke(app, ["compare", str(home / "baseline"), str(home / "optimized"), "--json"])
    assert result.exit_code == 0, result.output
    e2e = json.loads(result.stdout)["end_to_end"]
    assert (e2e["verdict"], e2e["verdict_basis"], e2e["kernel_verdict"]) == (verdict, "wall_time", kernel_verdict)
    assert e2e["base_wall_ms"] == pytest.approx(base_ms, abs=5e-4)
    assert e2e["opt_wall_ms"] == pytest.approx(opt_ms, abs=5e-4)
    assert e2e["speedup"] == pytest.approx(base_ms / opt_ms, rel=2e-3)
    assert e2e["agree"] is False
    assert e2e["headline"].startswith(f"{verdict.upper()} end to end")
    assert "no end-to-end wall time measured" not in result.stdout


def test_report_baseline_prints_end_to_end_first(examples: Path, tmp_path: Path) -> None:
    home = examples / "sdpa_attention"
    md = tmp_path / "report.md"
    result = runner.invoke(app, ["report", str(home / "optimized"), "--baseline", str(home / "baseline"),
                                 "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    first = result.stdout.lstrip().splitlines()[0]
    assert first.startswith("UNCHANGED end to end: 0.555 -> 0.550 ms"), first
    assert "host-bound or launch-bound" in result.stdout
    text = md.read_text()
    assert "**UNCHANGED** end to end" in text and "no end-to-end wall time measured" not in text


def test_a_pair_the_wall_times_did_not_measure_keeps_kernel_time(examples: Path) -> None:
    home = examples / "sdpa_attention"
    assert end_to_end_for(home / "baseline", home / "tf32") is None
    assert end_to_end_for(home / "optimized", home / "baseline") is None  # the sides swapped
    result = runner.invoke(app, ["compare", str(home / "baseline"), str(home / "tf32"), "--json"])
    assert result.exit_code == 0, result.output
    e2e = json.loads(result.stdout)["end_to_end"]
    assert e2e["verdict_basis"] == "kernel_time" and e2e["base_wall_ms"] is None


def test_the_loops_kept_trial_capture_is_the_optimized_side(tmp_path: Path) -> None:
    home = tmp_path / "gpt2-optimize"
    (home / "baseline").mkdir(parents=True)
    (home / "trial-3-qkv_fusion" / "capture").mkdir(parents=True)
    (home / "trial-2-cuda_graphs" / "capture").mkdir(parents=True)
    (home / "optimize.json").write_text(json.dumps({
        "final_run_dir": "oprof-runs/gpt2-optimize/trial-3-qkv_fusion",
        "wall_time": {"baseline": {"median_ms": 4.0}, "optimized": {"median_ms": 2.0}},
        "validation": {"max_abs_err": 0.01, "max_rel_err": 0.1}}))
    e = end_to_end_for(home / "baseline", home / "trial-3-qkv_fusion" / "capture" / "profile.json")
    assert e is not None and e.wall_speedup == pytest.approx(2.0) and e.max_abs_err == 0.01
    assert end_to_end_for(home / "baseline", home / "trial-2-cuda_graphs" / "capture") is None
