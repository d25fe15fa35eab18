"""``oprof compare --gate PCT`` on the shipped H200 pairs: one exit status per outcome.

tv_resnet18 (CUDA graphs): kernels 0.98x, the step 1.29x faster end to end -> faster (0).
sdpa_attention: kernels 8.7x faster, the step 1.01x -> unchanged at 5% (3), judged on wall time.
sdpa_attention reversed (no wall time recorded for that pair): kernel time 8.7x slower -> slower (1).
gpt2 against tv_resnet18: different workloads -> not comparable (4), with or without --force.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.profile_io import write_profile
from profiler_core.report.gate import EXIT_CODES
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.report.test_end_to_end_shipped import shipped_copy

runner = CliRunner()
app = load_commands()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gate")
    for name in ("sdpa_attention", "tv_resnet18", "gpt2"):
        shipped_copy(root, name, "baseline", "optimized")
    return root


CASES = [
    ("tv_resnet18/baseline", "tv_resnet18/optimized", "5", "faster", "wall_time"),
    ("sdpa_attention/baseline", "sdpa_attention/optimized", "5", "unchanged", "wall_time"),
    ("sdpa_attention/optimized", "sdpa_attention/baseline", "5", "slower", "kernel_time"),
    ("tv_resnet18/baseline", "tv_resnet18/optimized", "30", "unchanged", "wall_time"),  # 22% inside a 30% band
]


@pytest.mark.slow
@pytest.mark.parametrize(("base", "opt", "pct", "outcome", "basis"), CASES,
                         ids=["faster", "unchanged-wall", "slower-kernel", "unchanged-wide-band"])
def test_gate_exit_status_per_outcome(shipped: Path, base: str, opt: str, pct: str, outcome: str,
                                      basis: str) -> None:
    result = runner.invoke(app, ["compare", str(shipped / base), str(shipped / opt), "--gate", pct, "--json"])
    assert result.exit_code == EXIT_CODES[outcome], result.output  # type: ignore[index]
    gate = json.loads(result.stdout)["gate"]
    assert (gate["outcome"], gate["basis"], gate["exit_code"]) == (outcome, basis, result.exit_code)
    assert gate["reason"].startswith(outcome.upper()) and gate["reason"] in result.stderr


def test_exit_statuses_are_distinct_and_keep_the_user_error() -> None:
    codes = list(EXIT_CODES.values())
    assert len(set(codes)) == 4 and 2 not in codes and EXIT_CODES["faster"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("force", [False, True], ids=["refused", "forced"])
def test_different_workloads_are_not_comparable(shipped: Path, force: bool) -> None:
    args = ["compare", str(shipped / "gpt2/baseline"), str(shipped / "tv_resnet18/baseline"), "--gate", "5"]
    result = runner.invoke(app, args + (["--force"] if force else []))
    assert result.exit_code == EXIT_CODES["not_comparable"], result.output
    assert "NOT COMPARABLE" in result.stderr and "Traceback" not in result.output
    assert ("workload differs" if force else "measure different workloads") in result.stderr


@pytest.mark.parametrize(("kwargs", "needle"), [
    (({"chip": "gh100"}, {"chip": "ga100"}), "chip differs (gh100 vs ga100)"),
    (({"sm_mhz": 1980.0}, {"sm_mhz": 1200.0}), "clock"),
], ids=["chips", "clocks"])
def test_different_chips_or_clocks_are_not_comparable(tmp_path: Path, kwargs: tuple[dict, dict],
                                                      needle: str) -> None:
    paths = []
    for name, kw in zip(("a", "b"), kwargs, strict=True):
        b = ProfileBuilder(**kw)
        b.op("aten::mm", k("sgemm_128x64", 10))
        paths.append(str(write_profile(tmp_path / f"{name}.json", b.build())))
    result = runner.invoke(app, ["compare", *paths, "--gate", "5"])
    assert result.exit_code == EXIT_CODES["not_comparable"], result.output
    assert "NOT COMPARABLE" in result.stderr and needle in result.stderr


def test_fail_if_slower_still_judges_kernel_time(tmp_path: Path) -> None:
    paths = []
    for name, us in (("a", 10), ("b", 30)):
        b = ProfileBuilder()
        b.op("aten::mm", k("sgemm_128x64", us))
        paths.append(str(write_profile(tmp_path / f"{name}.json", b.build())))
    assert runner.invoke(app, ["compare", *paths, "--fail-if-slower", "5"]).exit_code == 1
    assert runner.invoke(app, ["compare", *paths, "--fail-if-slower", "500"]).exit_code == 0
    gated = runner.invoke(app, ["compare", *paths, "--gate", "500"])
    assert gated.exit_code == EXIT_CODES["unchanged"], gated.output
