"""The counter phase: ncu on the measured region, replay mode by trial, then a base-unit CSV.

The 20-counter set is resolved for the detected chip (names the chip's ncu lacks are
dropped and recorded with a reason). ``--replay-mode auto`` tries kernel replay and falls
back to application replay if it fails, recording which produced the report. Per-config
mode measures K launches per launch configuration; full mode measures every launch, or
only the first measured iteration with ``--dedup-iterations``.
"""

from __future__ import annotations

import os
import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from profiler_core.capture import phases
from profiler_core.capture.chip import available_metrics, select_counters
from profiler_core.capture.config import CounterMode, HarnessPhase, ReplayMode
from profiler_core.capture.runner import ProcessResult, failure_summary, tail_lines
from profiler_core.errors import ProfilerError, ToolFailedError
from profiler_core.rundir.layout import COUNTERS_CSV_NAME
from profiler_core.rundir.manifest import PhaseStatus

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import CaptureSession

REPORT_BASE = "counters"
CSV_NAME = COUNTERS_CSV_NAME
_PASSES = re.compile(r"^==PROF== Profiling .* - (\d+) pass(?:es)?\s*$")


def replay_passes(log: Path) -> list[int]:
    """Replay passes per profiled kernel, from ncu's ``==PROF== Profiling "k" - 0: ...100% - 9 passes`` lines."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [int(m.group(1)) for line in text.splitlines() if (m := _PASSES.match(line.strip()))]


def replay_attempts(requested: ReplayMode) -> list[str]:
    """Replay modes to try, in order."""
    if requested is ReplayMode.AUTO:
        return ["kernel", "application"]
    return [requested.value]


def _ncu_failed(result: ProcessResult, report_exists: bool) -> str | None:
    """Why an ncu run did not produce a usable report, or None when it did."""
    if result.returncode != 0:
        return f"exit {result.returncode}: {failure_summary(result)}"
    if not report_exists:
        return f"no report written: {failure_summary(result)}"
    errors = [line for path in (result.stdout_path, result.stderr_path)
              for line in tail_lines(path, 200) if line.startswith("==ERROR==")]
    if errors:
        return errors[0]
    return None


def _launch_count(cap: CaptureSession) -> int | None:
    config = cap.config
    if config.counters is CounterMode.FULL and config.dedup_iterations:
        if cap.kernels_per_iteration is None:
            raise ProfilerError(
                f"--dedup-iterations needs the same kernels in every iteration, but the kineto phase saw "
                f"{cap.kineto_kernels} kernels over {config.iters} iterations; capture without "
                "--dedup-iterations"
            )
    return phases.ncu_launch_count(config.counters, spot_check=config.spot_check,
                                   dedup_iterations=config.dedup_iterations,
                                   kernels_per_iteration=cap.kernels_per_iteration)


def _select(cap: CaptureSession) -> list[str]:
    """Resolve the counter names for this chip; record the choice in the manifest."""
    manifest, ncu = cap.manifest, cap.tools.ncu
    chip = manifest.gpu.chip
    available = None
    if ncu is not None and chip is not None:
        try:
            available = available_metrics(ncu, chip, ncu_version=manifest.versions.ncu)
        except ToolFailedError as err:
            manifest.warnings.append(f"metric names not checked against ncu's list ({err})")
    elif chip is None:
        manifest.warnings.append(
            f"no ncu chip name known for compute capability {manifest.gpu.compute_capability}; "
            "counter names were not checked (ncu drops names it does not know)")
    selection = select_counters(chip, available, ncu_version=manifest.versions.ncu,
                                flop_counters=cap.config.flop_counters)
    manifest.counters.metrics = dict(selection.ncu_names)
    manifest.counters.availability = list(selection.availability)
    if not selection.metrics:
        raise ToolFailedError(f"none of the counters exists on chip {chip}; capture with --counters none")
    return selection.metrics


def run_counters(cap: CaptureSession) -> None:
    """Run ncu, falling back in replay mode where allowed, then export counters.csv."""
    if cap.tools.ncu is None:
        raise ToolFailedError("counter phase asked for but ncu was not found; capture with --counters none")
    ncu, config, record_c = cap.tools.ncu, cap.config, cap.manifest.counters
    metrics = _select(cap)
    launch_count = _launch_count(cap)
    record_c.launch_count = launch_count
    record_c.kernels_per_iteration = cap.kernels_per_iteration
    base = cap.run_dir / REPORT_BASE
    report = base.with_suffix(".ncu-rep")
    app = cap.harness_cmd(HarnessPhase.REGION)
    attempts = replay_attempts(config.replay_mode)
    reasons: list[str] = []
    for i, replay in enumerate(attempts):
        cap.say("counters", f"running ncu ({config.counters.value}, {replay} replay)")
        report.unlink(missing_ok=True)
        command = phases.ncu_profile_command(
            ncu, metrics=metrics, report_base=base, app=app, mode=config.counters, replay_mode=replay,
            launch_count=launch_count, clock_control=config.ncu_clock_control)
        record, result, _ = cap.run_child("counters", command)
        record.note = f"replay mode {replay}"
        cap.raise_workload_error(record, result)
        why = _ncu_failed(result, report.is_file())
        if why is None:
            record.status = PhaseStatus.OK
            record_c.replay_mode = replay  # type: ignore[assignment]
            passes = replay_passes(result.stdout_path) or replay_passes(result.stderr_path)
            if passes:
                record_c.replay_passes_max = max(passes)
                record_c.replay_passes_median = float(statistics.median(passes))
            if reasons:
                record_c.replay_fallback_reason = "; ".join(reasons)
            break
        record.status = PhaseStatus.FAILED
        reasons.append(f"{replay} replay failed ({why})")
        if i + 1 == len(attempts):
            raise ToolFailedError(
                f"ncu failed: {'; '.join(reasons)}; see {result.stderr_path}"
                + ("" if config.replay_mode is ReplayMode.AUTO else "; try --replay-mode auto"))
        cap.manifest.warnings.append(f"ncu {replay} replay failed ({why}); retrying with application replay")
    cap.manifest.artifacts.counters_report = report.name
    _export_csv(cap, ncu, report, metrics)


def _export_csv(cap: CaptureSession, ncu: Path, report: Path, metrics: list[str]) -> None:
    final = cap.run_dir / CSV_NAME
    part = cap.run_dir / f".{CSV_NAME}.part"
    command = phases.ncu_import_command(ncu, report=report, metrics=metrics)
    record, result, _ = cap.run_child("counters-import", command, stdout_path=part)
    if result.returncode != 0 or part.stat().st_size == 0:
        record.status = PhaseStatus.FAILED
        part.unlink(missing_ok=True)
        raise ToolFailedError(
            f"ncu --import of {report} failed (exit {result.returncode}: {failure_summary(result)}); "
            f"the report is kept in {cap.run_dir}")
    os.replace(part, final)  # published whole: a reader never sees a half-written CSV
    record.stdout_log = CSV_NAME
    cap.manifest.artifacts.counters_csv = CSV_NAME
    duration = sum(p.duration_s for p in cap.manifest.phases if p.name.startswith("counters"))
    c = cap.manifest.counters
    cap.say("counters", f"done in {duration:.1f} s ({c.mode}, {c.replay_mode} replay)")
