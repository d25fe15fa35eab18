"""The timeline phase: nsys on the measured region, exported to SQLite.

nsys is optional: when it is missing, fails or times out, the capture goes on with the
Kineto trace as its timeline and the manifest says why. Under ``--clocks lock`` this is
the phase that runs with locked clocks (reset afterwards, whatever happens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler_core.capture import phases
from profiler_core.capture.clocks import locked_clocks
from profiler_core.capture.config import ClockPolicy, HarnessPhase
from profiler_core.capture.harness import parse_result
from profiler_core.capture.nsys_import import import_failure_hint
from profiler_core.capture.runner import ProcessResult, failure_summary
from profiler_core.errors import ToolFailedError
from profiler_core.rundir.layout import TIMELINE_NAME, TIMELINE_REPORT_NAME
from profiler_core.rundir.manifest import PhaseRecord, PhaseStatus

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import CaptureSession


def run_timeline(cap: CaptureSession) -> None:
    """Phase 2: nsys timeline of the measured region; on any failure the Kineto trace serves."""
    cap.manifest.timeline_source = "kineto"
    if not cap.config.nsys or cap.tools.nsys is None:
        why = "--no-nsys was given" if not cap.config.nsys else cap.tools.nsys_missing
        cap.manifest.warnings.append(f"nsys skipped ({why}); the Kineto trace is the timeline")
        if cap.config.clocks is ClockPolicy.LOCK:
            cap.manifest.warnings.append("--clocks lock locks the nsys phase; without nsys no phase ran "
                                         "with locked clocks")
        cap.say("timeline", "skipped: the Kineto trace is the timeline")
        return
    cap.say("timeline", "running nsys")
    base = cap.run_dir / "timeline"
    command = phases.nsys_profile_command(cap.tools.nsys, report_base=base,
                                          app=cap.harness_cmd(HarnessPhase.REGION))
    if cap.config.clocks is ClockPolicy.LOCK:
        record = _locked(cap, command)
    else:
        record = _profile(cap, command)
    if record is None:
        return
    report, sqlite = base.with_suffix(".nsys-rep"), cap.run_dir / TIMELINE_NAME
    export = phases.nsys_export_command(cap.tools.nsys, report=report, sqlite_out=sqlite)
    try:
        rec2, res2, _ = cap.run_child("timeline-export", export)
    except ToolFailedError as err:
        cap.manifest.warnings.append(f"nsys export failed ({err}); the Kineto trace is the timeline")
        return
    if res2.returncode != 0 or not sqlite.is_file():
        rec2.status = PhaseStatus.FAILED
        _fall_back(cap, f"nsys export failed (exit {res2.returncode}: {failure_summary(res2)}){_hint(cap, res2)}")
        return
    cap.manifest.artifacts.timeline_report = report.name
    cap.manifest.artifacts.timeline = sqlite.name
    cap.manifest.timeline_source = "nsys"
    cap.say("timeline", f"done in {record.duration_s + rec2.duration_s:.1f} s")


def _locked(cap: CaptureSession, command: list[str]) -> PhaseRecord | None:
    """The nsys phase under locked clocks; the reset runs whatever happens (and is recorded)."""
    clocks, smi = cap.manifest.clocks, cap.tools.nvidia_smi
    if smi is None or clocks.locked_sm_mhz is None or cap.gpu.nvml_index is None:
        raise ToolFailedError("--clocks lock: no probed clock or nvidia-smi; use --clocks observe")
    lock = None
    try:
        with locked_clocks(smi, cap.gpu.nvml_index, clocks.locked_sm_mhz) as lock:
            clocks.locked_phases.append("timeline")
            return _profile(cap, command)
    finally:
        if lock is not None:
            clocks.lock_commands = [list(c) for c in lock.commands]
            if lock.reset_message:
                cap.manifest.warnings.append(lock.reset_message)


def _profile(cap: CaptureSession, command: list[str]) -> PhaseRecord | None:
    try:
        record, result, _ = cap.run_child("timeline", command)
    except ToolFailedError as err:  # timed out: the Kineto timeline still stands
        _fall_back(cap, f"nsys failed ({err})")
        return None
    cap.raise_workload_error(record, result)
    report = cap.run_dir / TIMELINE_REPORT_NAME
    if result.returncode != 0 or not report.is_file():
        record.status = PhaseStatus.FAILED
        _fall_back(cap, f"nsys profile failed (exit {result.returncode}: {failure_summary(result)})"
                        f"{_hint(cap, result)}")
        return None
    # what the harness measured under nsys (wall and GPU time of the region), for overhead figures
    record.harness = parse_result(result.stdout_path.read_text(errors="replace"))
    return record


def _hint(cap: CaptureSession, result: ProcessResult) -> str:
    """``"; <what to install>"`` when nsys's importer lacks a system library, else ``""``."""
    hint = import_failure_hint((result.stderr_path, result.stdout_path), cap.tools.nsys)
    return f"; {hint}" if hint else ""


def _fall_back(cap: CaptureSession, why: str) -> None:
    """nsys gave no timeline: record ``why`` and go on with the Kineto trace."""
    cap.manifest.warnings.append(f"{why}; the Kineto trace is the timeline")
    cap.say("timeline", "failed: the Kineto trace is the timeline")
