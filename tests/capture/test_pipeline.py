"""capture() end to end with fake ncu / nsys / nvidia-smi and a fake harness replaying H200 artifacts.

Tests orchestration, fallbacks, failures and manifest contents without a GPU: the fake
tools log every invocation, and the determinism check runs on the real artifacts the
fakes hand back, read with the ingest readers.
Each capture starts about ten short processes, so the variants beyond the main paths are
marked slow.
"""

from __future__ import annotations

import json
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

import profiler_core.attribution
from profiler_core.capture import pipeline
from profiler_core.capture.config import CaptureConfig
from profiler_core.capture.determinism import PhaseLaunches, load_phase_launches
from profiler_core.errors import (
    CaptureCancelledError,
    DeterminismError,
    ProfilerError,
    ToolFailedError,
    WorkloadError,
)
from profiler_core.metrics.catalog import COUNTER_FIELDS, FLOP_FIELDS
from profiler_core.rundir.create import default_run_dir
from profiler_core.rundir.manifest import PhaseStatus, RunStatus, read_manifest
from profiler_core.schema import Profile
from tests.capture.conftest import FAKES, H200, FakeLog, FakeReader

WORKLOAD = Path(__file__).resolve().parents[1] / "data" / "h200_joinable" / "tiny_attention.py"


@pytest.fixture
def fakes(fake_env: FakeLog, monkeypatch: pytest.MonkeyPatch) -> FakeLog:
    monkeypatch.setattr(pipeline, "detect_gpu", lambda device: H200)
    monkeypatch.setattr(pipeline, "open_clock_reader", lambda index: (FakeReader(), None))
    return fake_env


def _config(tmp_path: Path, **kw: object) -> CaptureConfig:
    return CaptureConfig(
        out_dir=tmp_path / "run", harness=(sys.executable, "-S", str(FAKES / "fake_harness.py")), **kw
    )  # type: ignore[arg-type]


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_default_capture_writes_every_artifact_and_an_honest_manifest(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int, int, str]] = []
    attributed: list[Path] = []

    def attribute_run(run_dir: Path) -> Profile:
        attributed.append(run_dir)
        assert read_manifest(run_dir).status is RunStatus.COMPLETE  # attribution sees a finished run
        return Profile(warnings=["attributed by the stand-in"])

    monkeypatch.setattr(profiler_core.attribution, "attribute_run", attribute_run, raising=False)
    result = pipeline.capture(WORKLOAD, _config(tmp_path, attribute=True), progress=lambda *a: seen.append(a))
    run = result.run_dir
    m = read_manifest(run)
    assert m == result.manifest and m.status is RunStatus.COMPLETE and m.error is None
    for name in (
        "kineto.json",
        "inductor/torch_trace.tgz",
        "inductor/output_code.log",
        "timeline.nsys-rep",
        "timeline.sqlite",
        "counters.ncu-rep",
        "counters.csv",
        "manifest.json",
    ):
        assert (run / name).is_file(), name
    assert not (run / "inductor" / "torch_trace").exists()  # packed, then removed
    with tarfile.open(run / "inductor" / "torch_trace.tgz") as tar:
        assert all(n.startswith("torch_trace") for n in tar.getnames()) and len(tar.getnames()) > 1
    a = m.artifacts
    assert (a.kineto, a.timeline, a.counters_csv, a.counters_report, a.torch_trace, a.output_code) == (
        "kineto.json",
        "timeline.sqlite",
        "counters.csv",
        "counters.ncu-rep",
        "inductor/torch_trace.tgz",
        "inductor/output_code.log",
    )
    # the workload and the conditions
    assert m.workload.path == str(WORKLOAD) and len(m.workload.sha256) == 64
    assert (m.workload.compile_mode, m.workload.warmup_iterations, m.workload.measured_iterations) == (
        "default",
        2,
        2,
    )
    assert (m.gpu.name, m.gpu.chip, m.gpu.sm_count, m.gpu.compute_capability) == (
        "NVIDIA H200",
        "gh100",
        132,
        "9.0",
    )
    v = m.versions
    assert (v.ncu, v.nsys, v.torch, v.cuda, v.python, v.driver) == (
        "2025.3.1.0",
        "2025.3.1.90",
        "2.11.0+cu130",
        "13.0",
        "3.12.3",
        "580.95.05",
    )
    assert "TORCHINDUCTOR_CACHE_DIR" in m.environment
    # phases, in order, each with its command line, exit status and clocks
    assert [p.name for p in m.phases] == [
        "kineto",
        "timeline",
        "timeline-export",
        "counters",
        "counters-import",
    ]
    assert all(p.status is PhaseStatus.OK and p.exit_status == 0 and p.command for p in m.phases)
    assert all(p.clocks and p.clocks.samples >= 1 and p.clocks.sm_mhz_median == 1980 for p in m.phases)
    assert m.phases[0].harness["kernels"] == 44
    # counters: per-config, K=1, kernel replay, the 20 names for gh100 plus its FLOP counters
    c = m.counters
    assert (c.mode, c.replay_mode, c.launch_count, c.rows) == ("per-config", "kernel", 1, 14)
    twenty = [row for row in c.availability if row.field in COUNTER_FIELDS]
    assert len(twenty) == 20 and all(row.available for row in twenty)
    assert set(c.metrics) == {row.field for row in c.availability if row.available}
    assert {row.field for row in c.availability if not row.available} <= set(FLOP_FIELDS)
    assert m.timeline_source == "nsys"
    assert m.determinism.checked and m.determinism.passed and m.determinism.compared == ["nsys", "ncu"]
    assert m.determinism.kernels == 44 and m.warnings == []
    # every harness process shared one Inductor cache; only the first collected provenance
    harness_calls = fakes.entries("harness")
    assert [h["phase"] for h in harness_calls] == ["kineto", "region", "region"]
    assert len({h["cache"] for h in harness_calls}) == 1
    assert harness_calls[0]["torch_trace"] and not harness_calls[1]["torch_trace"]
    assert "--provenance" in harness_calls[0]["argv"]
    # the cold cache is gone afterwards
    assert not Path(harness_calls[0]["cache"]).exists()
    # progress: every planned phase reported, steps counted against the plan
    assert {(s[0], s[1], s[2]) for s in seen if s[3].startswith("done")} == {
        ("kineto", 1, 5),
        ("timeline", 2, 5),
        ("counters", 3, 5),
        ("check", 4, 5),
        ("attribute", 5, 5),
    }
    # --attribute: profile.json from the attribution engine, named in the manifest
    assert attributed == [run] and m.artifacts.profile == "profile.json"
    # the stand-in's profile has no kernels, which read_profile refuses: read the JSON itself
    assert json.loads((run / "profile.json").read_text())["warnings"] == ["attributed by the stand-in"]


@pytest.mark.slow
def test_ncu_command_in_the_manifest_has_the_region_flags(fakes: FakeLog, tmp_path: Path) -> None:
    m = pipeline.capture(WORKLOAD, _config(tmp_path, spot_check=2)).manifest
    argv = m.phase("counters").command
    for flag, value in (
        ("--profile-from-start", "off"),
        ("--target-processes", "application-only"),
        ("--clock-control", "none"),
        ("--replay-mode", "kernel"),
        ("--launch-count", "2"),
        ("--filter-mode", "per-launch-config"),
    ):
        assert _value(argv, flag) == value
    assert "--nvtx" in argv
    imp = m.phase("counters-import").command
    assert _value(imp, "--print-units") == "base" and _value(imp, "--metrics") == _value(argv, "--metrics")
    spread = m.counters.spot_check_spread
    assert spread is not None and spread.samples_per_config == 2 and spread.configs == 14


def test_nsys_missing_falls_back_to_kineto_and_says_why(fakes: FakeLog, tmp_path: Path) -> None:
    (tmp_path / "bin" / "nsys").unlink()
    result = pipeline.capture(WORKLOAD, _config(tmp_path))
    m = result.manifest
    assert m.status is RunStatus.COMPLETE and m.timeline_source == "kineto"
    assert "timeline" not in [p.name for p in m.phases] and m.artifacts.timeline is None
    assert any("nsys skipped" in w and "not found" in w for w in m.warnings)
    assert m.versions.nsys is None and m.determinism.compared == ["ncu"]
    assert not fakes.entries("nsys")


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["profile", "export"], ids=["profile-fails", "export-fails"])
def test_nsys_failure_falls_back_to_kineto(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    monkeypatch.setenv("FAKE_NSYS_FAIL", stage)
    m = pipeline.capture(WORKLOAD, _config(tmp_path)).manifest
    assert m.status is RunStatus.COMPLETE and m.timeline_source == "kineto" and m.artifacts.timeline is None
    warning = next(w for w in m.warnings if w.startswith(f"nsys {stage} failed"))
    assert "libdw.so.1" in warning and "the Kineto trace is the timeline" in warning
    assert "cannot load the system library libdw.so.1; apt-get install libdw1" in warning


@pytest.mark.slow
def test_nsys_that_records_but_cannot_import_names_the_library(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS_FAIL", "import")
    m = pipeline.capture(WORKLOAD, _config(tmp_path)).manifest
    assert m.status is RunStatus.COMPLETE and m.timeline_source == "kineto"
    warning = next(w for w in m.warnings if w.startswith("nsys profile failed (exit 0"))
    assert ("nsys recorded, but its report importer cannot load the system library libdw.so.1; "
            "apt-get install libdw1 (Debian/Ubuntu) or dnf install elfutils-libs (RHEL/Fedora)") in warning


@pytest.mark.slow
def test_no_nsys_flag_skips_the_timeline_phase(fakes: FakeLog, tmp_path: Path) -> None:
    m = pipeline.capture(WORKLOAD, _config(tmp_path, nsys=False)).manifest
    assert m.timeline_source == "kineto" and any("--no-nsys" in w for w in m.warnings)


def test_kernel_replay_failure_falls_back_to_application_replay(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NCU_FAIL_REPLAY", "kernel")
    m = pipeline.capture(WORKLOAD, _config(tmp_path, counters="full")).manifest
    assert m.status is RunStatus.COMPLETE
    assert m.counters.replay_mode == "application"
    assert "kernel replay failed" in m.counters.replay_fallback_reason
    counters = [p for p in m.phases if p.name == "counters"]
    assert [p.status for p in counters] == [PhaseStatus.FAILED, PhaseStatus.OK]
    assert [_value(p.command, "--replay-mode") for p in counters] == ["kernel", "application"]
    assert m.counters.rows == 44 and m.determinism.passed


@pytest.mark.slow
def test_explicit_kernel_replay_does_not_fall_back(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NCU_FAIL_REPLAY", "kernel")
    with pytest.raises(ToolFailedError, match="kernel replay failed.*try --replay-mode auto"):
        pipeline.capture(WORKLOAD, _config(tmp_path, replay_mode="kernel"))
    m = read_manifest(tmp_path / "run")
    assert m.status is RunStatus.FAILED and "kernel replay failed" in m.error


@pytest.mark.slow
def test_full_mode_dedup_profiles_one_iteration(fakes: FakeLog, tmp_path: Path) -> None:
    m = pipeline.capture(WORKLOAD, _config(tmp_path, counters="full", dedup_iterations=True)).manifest
    assert _value(m.phase("counters").command, "--launch-count") == "22"
    assert (m.counters.kernels_per_iteration, m.counters.launch_count, m.counters.rows) == (22, 22, 22)
    assert "--filter-mode" not in m.phase("counters").command
    assert m.determinism.passed


@pytest.mark.slow
def test_dedup_refuses_uneven_iterations(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KERNELS", "45")
    with pytest.raises(ProfilerError, match="45 kernels over 2 iterations"):
        pipeline.capture(WORKLOAD, _config(tmp_path, counters="full", dedup_iterations=True))


@pytest.mark.slow
def test_counters_none_runs_no_ncu(fakes: FakeLog, tmp_path: Path) -> None:
    m = pipeline.capture(WORKLOAD, _config(tmp_path, counters="none")).manifest
    assert m.status is RunStatus.COMPLETE and m.artifacts.counters_csv is None
    assert not [e for e in fakes.entries("ncu") if "--query-metrics" not in e["argv"]]


def test_workload_error_is_one_line_and_recorded(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARNESS_FAIL", "kineto")
    with pytest.raises(WorkloadError) as err:
        pipeline.capture(WORKLOAD, _config(tmp_path))
    assert str(err.value) == f"{WORKLOAD}: raised ValueError in step(): bad shape"
    m = read_manifest(tmp_path / "run")
    assert m.status is RunStatus.FAILED and m.error == str(err.value)
    assert m.phase("kineto").status is PhaseStatus.FAILED


@pytest.mark.slow
def test_workload_error_under_ncu_is_still_a_workload_error(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARNESS_FAIL", "region")
    with pytest.raises(WorkloadError, match="bad shape"):
        pipeline.capture(WORKLOAD, _config(tmp_path, nsys=False))


@pytest.mark.slow
def test_divergent_phase_raises_and_is_recorded(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def shifted(run_dir: Path, **kw: str | None) -> PhaseLaunches:
        found = load_phase_launches(run_dir, **kw)  # type: ignore[arg-type]
        assert found.nsys is not None
        return PhaseLaunches(kineto=found.kineto, nsys=found.nsys[1:], ncu=found.ncu)

    monkeypatch.setattr(pipeline, "load_phase_launches", shifted)
    with pytest.raises(
        DeterminismError, match="the nsys timeline diverges from the Kineto trace at launch #0"
    ):
        pipeline.capture(WORKLOAD, _config(tmp_path))
    m = read_manifest(tmp_path / "run")
    assert (
        m.status is RunStatus.FAILED and m.determinism.passed is False and "launch #0" in m.determinism.note
    )


@pytest.mark.slow
def test_phase_timeout_kills_and_fails(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARNESS_SLEEP", "kineto")
    with pytest.raises(ToolFailedError, match="kineto phase timed out after 1 s"):
        pipeline.capture(WORKLOAD, _config(tmp_path, phase_timeout_s=1.0))
    assert read_manifest(tmp_path / "run").phase("kineto").status is PhaseStatus.FAILED


@pytest.mark.slow
def test_cancel_event_stops_the_capture(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARNESS_SLEEP", "kineto")
    cancel = threading.Event()

    def cancel_once_the_harness_runs() -> None:
        deadline = time.monotonic() + 30
        while not fakes.entries("harness") and time.monotonic() < deadline:
            time.sleep(0.02)
        cancel.set()

    threading.Thread(target=cancel_once_the_harness_runs, daemon=True).start()
    with pytest.raises(CaptureCancelledError):
        pipeline.capture(WORKLOAD, _config(tmp_path), cancel=cancel)
    m = read_manifest(tmp_path / "run")
    assert m.status is RunStatus.CANCELLED and m.phase("kineto").status is PhaseStatus.CANCELLED


@pytest.mark.slow
def test_lock_probes_locks_the_timeline_and_resets(fakes: FakeLog, tmp_path: Path) -> None:
    m = pipeline.capture(WORKLOAD, _config(tmp_path, clocks="lock", probe_s=0.2)).manifest
    assert m.status is RunStatus.COMPLETE
    assert (m.clocks.policy, m.clocks.locked_sm_mhz, m.clocks.lock_source) == ("lock", 1980, "probed")
    assert m.clocks.locked_phases == ["timeline"]
    assert [c[1:] for c in m.clocks.lock_commands] == [["-i", "0", "-lgc", "1980,1980"], ["-i", "0", "-rgc"]]
    assert [p.name for p in m.phases][:2] == ["probe", "kineto"]
    # the lock brackets exactly the nsys run
    order = [e["tool"] for e in json.loads(f"[{','.join(fakes.path.read_text().splitlines())}]")]
    lock_at, reset_at = order.index("nvidia-smi"), len(order) - 1 - order[::-1].index("nvidia-smi")
    assert order[lock_at + 1 : reset_at] == ["nsys", "harness"]
    # a second capture reuses the probed clock
    m2 = pipeline.capture(WORKLOAD, _config(tmp_path / "again", clocks="lock")).manifest
    assert m2.clocks.lock_source == "cached" and "probe" not in [p.name for p in m2.phases]


@pytest.mark.slow
def test_lock_refused_is_a_clear_failure(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMI_REFUSE", "1")
    with pytest.raises(ToolFailedError, match="refused to lock.*insufficient permissions"):
        pipeline.capture(WORKLOAD, _config(tmp_path, clocks="lock", probe_s=0.2))
    m = read_manifest(tmp_path / "run")
    assert m.status is RunStatus.FAILED and "--clocks observe" in m.error
    assert not fakes.entries("nsys")


@pytest.mark.slow
def test_reset_runs_when_the_locked_phase_is_cancelled(
    fakes: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancel = threading.Event()

    def progress(phase: str, step: int, total: int, message: str) -> None:
        if phase == "timeline" and message.startswith("running"):
            threading.Timer(0.3, cancel.set).start()

    monkeypatch.setenv("FAKE_HARNESS_SLEEP", "region")
    with pytest.raises(CaptureCancelledError):
        pipeline.capture(
            WORKLOAD, _config(tmp_path, clocks="lock", probe_s=0.2), progress=progress, cancel=cancel
        )
    smi = [e["argv"][-1] for e in fakes.entries("nvidia-smi")]
    assert smi == ["1980,1980", "-rgc"]
    assert read_manifest(tmp_path / "run").clocks.lock_commands[-1][-1] == "-rgc"


def test_missing_workload_fails_before_anything_is_made(fakes: FakeLog, tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such workload file"):
        pipeline.capture(tmp_path / "nope.py", _config(tmp_path))
    assert not (tmp_path / "run").exists()


def test_missing_ncu_fails_fast_unless_counters_are_off(fakes: FakeLog, tmp_path: Path) -> None:
    (tmp_path / "bin" / "ncu").unlink()
    with pytest.raises(ProfilerError, match="ncu \\(Nsight Compute\\) not found.*--counters none"):
        pipeline.capture(WORKLOAD, _config(tmp_path))
    assert not (tmp_path / "run").exists()


def test_out_dir_holding_files_is_refused(fakes: FakeLog, tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "old.txt").write_text("x")
    with pytest.raises(ProfilerError, match="already holds files"):
        pipeline.capture(WORKLOAD, _config(tmp_path))


def test_default_run_dir_is_stem_and_utc_time(tmp_path: Path) -> None:
    first = default_run_dir(WORKLOAD, base=tmp_path)
    assert first.parent == tmp_path and first.name.startswith("tiny_attention-") and first.name.endswith("Z")
    first.mkdir()
    assert default_run_dir(WORKLOAD, base=tmp_path).name.startswith(first.name)


def test_environment_subset_keeps_relevant_variables_only() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
        "HOME": "/h",
        "HF_TOKEN": "x",
        "TORCH_HUB_TOKEN": "y",
        "OMP_NUM_THREADS": "4",
    }
    assert pipeline.environment_subset(env) == {
        "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "4",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
    }


@pytest.mark.parametrize("given", [False, True], ids=["own-temporary-cache", "given-cache"])
def test_inductor_cache_is_shared_by_the_phases_and_kept_only_when_given(
        fakes: FakeLog, tmp_path: Path, given: bool) -> None:
    cache = tmp_path / "caches" / "baseline"
    config = _config(tmp_path, counters="none", **({"inductor_cache_dir": cache} if given else {}))
    m = pipeline.capture(WORKLOAD, config).manifest
    used = Path(m.environment["TORCHINDUCTOR_CACHE_DIR"])
    assert (used == cache) is given
    assert used.is_dir() is given  # a given cache outlives the capture (for a timing run); its own does not


def test_unusable_inductor_cache_dir_fails_before_anything_is_made(fakes: FakeLog, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ProfilerError, match="cannot hold the Inductor cache"):
        pipeline.capture(WORKLOAD, _config(tmp_path, counters="none", inductor_cache_dir=blocker / "cache"))
    assert not (tmp_path / "run").exists()
