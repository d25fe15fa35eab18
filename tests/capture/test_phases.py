"""Command lines of every phase: the flags each tool needs, per counter and replay mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.capture import phases
from profiler_core.capture.config import CaptureConfig, CompileMode, CounterMode, HarnessPhase
from profiler_core.errors import ProfilerError
from profiler_core.metrics.catalog import ncu_names_for_chip

NCU, NSYS = Path("/opt/ncu/ncu"), Path("/opt/nsys/nsys")
APP = ["python", "-m", "profiler_core.capture.harness", "--phase", "region"]
METRICS = list(ncu_names_for_chip("gh100").values())


def _value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_harness_command_carries_every_measurement_condition() -> None:
    cmd = phases.harness_command(
        ["py", "-m", "h"],
        workload=Path("w.py"),
        phase=HarnessPhase.KINETO,
        compile_mode=CompileMode.MAX_AUTOTUNE,
        warmup=3,
        iters=5,
        device="cuda:1",
        seed=7,
        out=Path("r/kineto.json"),
        provenance=True,
    )
    assert cmd[:3] == ["py", "-m", "h"]
    assert (_value(cmd, "--phase"), _value(cmd, "--workload"), _value(cmd, "--compile-mode")) == (
        "kineto",
        "w.py",
        "max-autotune",
    )
    assert (
        _value(cmd, "--warmup"),
        _value(cmd, "--iters"),
        _value(cmd, "--device"),
        _value(cmd, "--seed"),
    ) == ("3", "5", "cuda:1", "7")
    assert _value(cmd, "--out") == "r/kineto.json" and "--provenance" in cmd


def test_harness_probe_has_no_workload() -> None:
    cmd = phases.harness_command(
        ["h"],
        workload=None,
        phase=HarnessPhase.PROBE,
        compile_mode=CompileMode.EAGER,
        warmup=0,
        iters=1,
        device="cuda",
        seed=0,
        probe_s=2.5,
    )
    assert "--workload" not in cmd and _value(cmd, "--probe-seconds") == "2.5"


def test_phase_env_shares_one_cache_and_drops_cache_disabling(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/x", phases.ENV_DISABLE_CACHES: "1"}
    env = phases.phase_env(base, inductor_cache=tmp_path / "c", pythonpath=Path("/pkg"))
    assert env[phases.ENV_INDUCTOR_CACHE] == str(tmp_path / "c")
    assert phases.ENV_DISABLE_CACHES not in env
    assert env["PYTHONPATH"] == "/pkg:/x" and env["PYTHONUNBUFFERED"] == "1"


def test_kineto_env_adds_provenance_trace_and_output_code_log(tmp_path: Path) -> None:
    env = phases.kineto_env(
        {"TORCH_LOGS": "graph_breaks"}, torch_trace_dir=tmp_path / "tt", output_code_log=tmp_path / "oc.log"
    )
    assert env["TORCH_TRACE"] == str(tmp_path / "tt")
    assert env["TORCH_LOGS"] == "graph_breaks,output_code"
    assert env["TORCH_LOGS_OUT"] == str(tmp_path / "oc.log")


def test_nsys_profile_is_limited_to_the_measured_region() -> None:
    cmd = phases.nsys_profile_command(NSYS, report_base=Path("r/timeline"), app=APP)
    assert cmd[:2] == [str(NSYS), "profile"]
    assert _value(cmd, "-t") == "cuda,nvtx" and _value(cmd, "-s") == "none"
    assert _value(cmd, "--cpuctxsw") == "none" and _value(cmd, "--force-overwrite") == "true"
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert "--cuda-graph-trace=node" in cmd  # a graph replay's kernels, not one graph event
    assert _value(cmd, "-o") == "r/timeline"
    assert cmd[-len(APP) :] == APP


def test_nsys_export_to_sqlite() -> None:
    cmd = phases.nsys_export_command(NSYS, report=Path("r/timeline.nsys-rep"), sqlite_out=Path("r/t.sqlite"))
    assert cmd[1:4] == ["export", "--type", "sqlite"]
    assert _value(cmd, "-o") == "r/t.sqlite" and cmd[-1] == "r/timeline.nsys-rep"


@pytest.mark.parametrize(
    ("mode", "spot", "dedup", "kpi", "count", "per_config"),
    [
        (CounterMode.PER_CONFIG, 1, False, None, "1", True),
        (CounterMode.PER_CONFIG, 3, False, None, "3", True),
        (CounterMode.FULL, 1, False, 22, None, False),
        (CounterMode.FULL, 1, True, 22, "22", False),
    ],
    ids=["per-config-k1", "per-config-spot-check-3", "full", "full-dedup"],
)
def test_ncu_profile_flags_per_mode(
    mode: CounterMode, spot: int, dedup: bool, kpi: int | None, count: str | None, per_config: bool
) -> None:
    launch_count = phases.ncu_launch_count(
        mode, spot_check=spot, dedup_iterations=dedup, kernels_per_iteration=kpi
    )
    cmd = phases.ncu_profile_command(
        NCU,
        metrics=METRICS,
        report_base=Path("r/counters"),
        app=APP,
        mode=mode,
        replay_mode="kernel",
        launch_count=launch_count,
    )
    assert "--nvtx" in cmd
    assert _value(cmd, "--profile-from-start") == "off"
    assert _value(cmd, "--target-processes") == "application-only"
    assert _value(cmd, "--clock-control") == "none"
    assert _value(cmd, "--replay-mode") == "kernel"
    assert _value(cmd, "--metrics").split(",") == METRICS and len(METRICS) == 20
    assert _value(cmd, "-o") == "r/counters"
    assert ("--launch-count" in cmd and _value(cmd, "--launch-count")) == (count or False)
    assert ("--filter-mode" in cmd) is per_config
    if per_config:
        assert _value(cmd, "--filter-mode") == "per-launch-config"
    assert cmd[-len(APP) :] == APP


def test_ncu_application_replay_and_clock_control() -> None:
    cmd = phases.ncu_profile_command(
        NCU,
        metrics=METRICS,
        report_base=Path("c"),
        app=APP,
        mode=CounterMode.FULL,
        replay_mode="application",
        launch_count=None,
        clock_control="base",
    )
    assert _value(cmd, "--replay-mode") == "application" and _value(cmd, "--clock-control") == "base"


def test_ncu_refuses_unresolved_replay_mode() -> None:
    with pytest.raises(ValueError, match="auto"):
        phases.ncu_profile_command(
            NCU,
            metrics=METRICS,
            report_base=Path("c"),
            app=APP,
            mode=CounterMode.FULL,
            replay_mode="auto",
            launch_count=None,
        )


def test_ncu_import_exports_raw_page_in_base_units() -> None:
    cmd = phases.ncu_import_command(NCU, report=Path("r/counters.ncu-rep"), metrics=METRICS)
    assert _value(cmd, "--import") == "r/counters.ncu-rep" and "--csv" in cmd
    assert _value(cmd, "--page") == "raw" and _value(cmd, "--print-units") == "base"
    assert _value(cmd, "--metrics").split(",") == METRICS


def test_query_metrics_names_the_chip() -> None:
    assert phases.ncu_query_metrics_command(NCU, "gb202") == [str(NCU), "--query-metrics", "--chip", "gb202"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"iters": 0}, "at least 1 measured"),
        ({"warmup": -1}, "0 or more warmup"),
        ({"spot_check": 2, "counters": "full"}, "only --counters per-config"),
        ({"dedup_iterations": True}, "applies to --counters full"),
        ({"compile_mode": "turbo"}, "compile_mode='turbo' is not one of"),
        ({"ncu_clock_control": "max"}, "none, base"),
        ({"phase_timeout_s": 0}, "positive"),
    ],
    ids=[
        "no-iters",
        "negative-warmup",
        "spot-check-in-full",
        "dedup-in-per-config",
        "bad-compile-mode",
        "bad-clock-control",
        "zero-timeout",
    ],
)
def test_config_rejects_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ProfilerError, match=message):
        CaptureConfig(**kwargs)


def test_config_coerces_strings_and_builds_the_harness_command() -> None:
    config = CaptureConfig(compile_mode="eager", counters="full", python="/usr/bin/python3")
    assert config.compile_mode is CompileMode.EAGER and config.counters is CounterMode.FULL
    assert config.harness_argv() == ["/usr/bin/python3", "-m", "profiler_core.capture.harness"]
    assert CaptureConfig(harness=("a", "b")).harness_argv() == ["a", "b"]


def test_phases_have_a_default_timeout() -> None:
    # a hung workload must not hold the GPU forever when nobody passed --phase-timeout
    assert CaptureConfig().phase_timeout_s == 3600.0
    from typer.testing import CliRunner

    from profiler_core.cli import load_commands

    help_text = CliRunner().invoke(load_commands(), ["capture", "--help"], env={"COLUMNS": "200"}).output
    assert "--phase-timeout" in help_text and "3600" in help_text
