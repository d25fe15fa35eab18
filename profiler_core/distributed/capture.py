"""``capture_ranks(workload, config, nproc_per_node)``: every capture phase, once per rank, under torchrun.

    kineto     torchrun <harness> --phase kineto --out <run>/rank{rank}/kineto.json
    timeline   torchrun --no-python nsys ... -o timeline_rank%q{RANK} <harness> --phase region
    counters   torchrun --no-python ncu --target-processes all ... -o counters_rank%q{RANK} <harness> ...
    split      each rank's report into <run>/rank<N>/, exported (sqlite, base-unit CSV)
    manifests  <run>/rank<N>/manifest.json (a normal run manifest) + <run>/manifest.json (the ranks)

The harness joins the process group itself (see :mod:`profiler_core.capture.harness`).
The Inductor artifacts are shared (one cache, all ranks compile the same graph) and live
in ``<run>/inductor/``; each rank's manifest points there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import profiler_core
from profiler_core.capture import phases
from profiler_core.capture.chip import detect_gpu, select_counters
from profiler_core.capture.config import CaptureConfig, ClockPolicy, CounterMode, HarnessPhase, ReplayMode
from profiler_core.capture.inductor_artifacts import pack_torch_trace
from profiler_core.capture.pipeline import environment_subset, find_tools
from profiler_core.capture.runner import failure_summary, run_process
from profiler_core.distributed import launch
from profiler_core.errors import ProfilerError, ToolFailedError, ToolNotFoundError
from profiler_core.rundir import RankEntry, RanksManifest, rank_dir, write_ranks_manifest
from profiler_core.rundir.create import new_run_dir, utc_now
from profiler_core.rundir.manifest import (
    Artifacts,
    ClockRecord,
    CounterRecord,
    GpuRecord,
    RunManifest,
    RunStatus,
    WorkloadRecord,
    write_manifest,
)
from profiler_core.workload import checked_workload_path

ProgressFn = Callable[[str, int, int, str], None]
_GPU_COUNT_SCRIPT = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"


def check_gpu_count(available: int, nproc_per_node: int) -> None:
    """Fail fast, in one line, when fewer GPUs are visible than ranks asked for."""
    if nproc_per_node < 1:
        raise ProfilerError(f"--nproc-per-node {nproc_per_node}: pass 1 or more processes")
    if available < nproc_per_node:
        raise ToolNotFoundError(
            f"--nproc-per-node {nproc_per_node} needs {nproc_per_node} CUDA GPUs, but {available} "
            f"{'is' if available == 1 else 'are'} visible; run on a machine with {nproc_per_node} GPUs "
            "(check CUDA_VISIBLE_DEVICES)")


def visible_gpu_count(python: str) -> int:
    """How many CUDA devices the workload's interpreter sees (0 when torch or CUDA is missing)."""
    try:
        out = subprocess.run([python, "-c", _GPU_COUNT_SCRIPT], capture_output=True, text=True, timeout=120,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    lines = out.stdout.strip().splitlines()
    return int(lines[-1]) if out.returncode == 0 and lines and lines[-1].isdigit() else 0


class _RankCapture:
    """One multi-rank capture in progress."""

    def __init__(self, workload: Path, config: CaptureConfig, nproc: int, run_dir: Path,
                 progress: ProgressFn | None, cancel: threading.Event | None) -> None:
        self.workload, self.config, self.nproc, self.run_dir = workload, config, nproc, run_dir
        self.progress, self.cancel = progress, cancel
        self.cache_dir = Path(tempfile.mkdtemp(prefix="oprof-inductor-"))
        package_root = Path(profiler_core.__file__).resolve().parent.parent
        self.env = launch.distributed_env(
            phases.phase_env(os.environ, inductor_cache=self.cache_dir, pythonpath=package_root))
        self.gpu = detect_gpu(config.device)
        self.tools = find_tools(config)
        self.plan = ["kineto", "timeline", "counters", "manifests"]
        self.art: dict[int, Artifacts] = {r: Artifacts() for r in range(nproc)}
        self.metrics: list[str] = []
        self.top = RanksManifest(
            operator_profiler=profiler_core.__version__, created_at=utc_now(), workload=str(workload),
            world_size=nproc, launcher=launch.torchrun_prefix(config.python, nproc),
            ranks=[RankEntry(rank=r, dir=rank_dir(Path("."), r).as_posix()) for r in range(nproc)],
            environment=environment_subset(self.env))
        for r in range(nproc):
            rank_dir(run_dir, r).mkdir(parents=True, exist_ok=True)

    def say(self, phase: str, message: str) -> None:
        if self.progress is not None:
            self.progress(phase, self.plan.index(phase) + 1, len(self.plan), message)

    def harness_args(self, phase: HarnessPhase, out: Path | None = None, provenance: bool = False) -> list[str]:
        c = self.config
        return phases.harness_command([], workload=self.workload, phase=phase, compile_mode=c.compile_mode,
                                      warmup=c.warmup, iters=c.iters, device=c.device, seed=c.seed, out=out,
                                      provenance=provenance)

    def run(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        logs = self.run_dir / "logs"
        result = run_process(command, stdout_path=logs / f"{name}.stdout.log",
                             stderr_path=logs / f"{name}.stderr.log", env=env or self.env,
                             timeout_s=self.config.phase_timeout_s, cancel=self.cancel, label=f"{name} phase")
        if result.returncode != 0:
            raise ToolFailedError(f"{name} phase failed on some rank (exit {result.returncode}: "
                                  f"{failure_summary(result)}); see {result.stderr_path}")

    def kineto(self) -> None:
        self.say("kineto", f"running on {self.nproc} ranks (cold compile)")
        inductor = self.run_dir / "inductor"
        inductor.mkdir(exist_ok=True)
        env = phases.kineto_env(self.env, torch_trace_dir=inductor / "torch_trace",
                                output_code_log=inductor / "output_code.log")
        out = self.run_dir / "rank{rank}" / "kineto.json"
        cmd = launch.torchrun_command(self.config.harness_argv(), self.nproc,
                                      self.harness_args(HarnessPhase.KINETO, out=out, provenance=True))
        self.run("kineto", cmd, env)
        shared = {}
        if pack_torch_trace(inductor / "torch_trace", inductor / "torch_trace.tgz"):
            shared["torch_trace"] = "../inductor/torch_trace.tgz"
        if (inductor / "output_code.log").is_file():
            shared["output_code"] = "../inductor/output_code.log"
        for r, art in self.art.items():
            if not (rank_dir(self.run_dir, r) / "kineto.json").is_file():
                raise ToolFailedError(f"rank {r} wrote no Kineto trace; see {self.run_dir / 'logs'}")
            art.kineto = "kineto.json"
            for key, value in shared.items():
                setattr(art, key, value)
        self.say("kineto", "done")

    def timeline(self) -> None:
        if not self.config.nsys or self.tools.nsys is None:
            self.top.warnings.append("nsys skipped; each rank's Kineto trace is its timeline")
            self.say("timeline", "skipped")
            return
        self.say("timeline", f"running nsys on {self.nproc} ranks")
        nsys = self.tools.nsys
        tool = phases.nsys_profile_command(nsys, report_base=launch.rank_report_base(self.run_dir, "timeline"),
                                           app=[*self.config.harness_argv(), *self.harness_args(HarnessPhase.REGION)])
        self.run("timeline", launch.wrapped_per_rank(self.config.python, self.nproc, tool))
        for r, art in self.art.items():
            report = _move(launch.rank_report_path(self.run_dir, "timeline", r, ".nsys-rep"),
                           rank_dir(self.run_dir, r) / "timeline.nsys-rep")
            sqlite = report.with_suffix(".sqlite")
            self.run(f"timeline-export-rank{r}", phases.nsys_export_command(nsys, report=report, sqlite_out=sqlite))
            art.timeline_report, art.timeline = report.name, sqlite.name
        self.say("timeline", "done")

    def counters(self) -> None:
        if self.config.counters is CounterMode.NONE or self.tools.ncu is None:
            self.say("counters", "skipped")
            return
        ncu = self.tools.ncu
        self.metrics = select_counters(self.gpu.chip, None).metrics
        replay = "kernel" if self.config.replay_mode is ReplayMode.AUTO else self.config.replay_mode.value
        self.say("counters", f"running ncu ({self.config.counters.value}, {replay} replay) on {self.nproc} ranks")
        tool = phases.ncu_profile_command(
            ncu, metrics=self.metrics, report_base=launch.rank_report_base(self.run_dir, "counters"),
            app=[*self.config.harness_argv(), *self.harness_args(HarnessPhase.REGION)],
            mode=self.config.counters, replay_mode=replay,
            launch_count=phases.ncu_launch_count(self.config.counters, spot_check=self.config.spot_check),
            clock_control=self.config.ncu_clock_control)
        self.run("counters", launch.wrapped_per_rank(self.config.python, self.nproc, launch.ncu_all_processes(tool)))
        for r, art in self.art.items():
            report = _move(launch.rank_report_path(self.run_dir, "counters", r, ".ncu-rep"),
                           rank_dir(self.run_dir, r) / "counters.ncu-rep")
            csv = report.with_suffix(".csv")
            logs = self.run_dir / "logs"
            result = run_process(phases.ncu_import_command(ncu, report=report, metrics=self.metrics),
                                 stdout_path=csv, stderr_path=logs / f"counters-import-rank{r}.stderr.log",
                                 env=self.env, label=f"ncu import rank {r}")
            if result.returncode != 0:
                raise ToolFailedError(f"ncu --import of {report} failed: {failure_summary(result)}")
            art.counters_report, art.counters_csv = report.name, csv.name
        self.say("counters", "done")

    def rank_manifest(self, rank: int, status: RunStatus, error: str | None) -> RunManifest:
        c, g = self.config, self.gpu
        return RunManifest(
            operator_profiler=profiler_core.__version__, created_at=self.top.created_at, status=status,
            error=error,
            workload=WorkloadRecord(path=str(self.workload),
                                    sha256=hashlib.sha256(self.workload.read_bytes()).hexdigest(),
                                    compile_mode=c.compile_mode.value, warmup_iterations=c.warmup,
                                    measured_iterations=c.iters, device=f"cuda:{rank}", seed=c.seed, python=c.python),
            gpu=GpuRecord(name=g.name, chip=g.chip, sm_count=g.sm_count, memory_total_bytes=g.memory_total_bytes),
            environment={**self.top.environment, "RANK": str(rank), "WORLD_SIZE": str(self.nproc)},
            clocks=ClockRecord(policy="off"),
            counters=CounterRecord(mode=c.counters.value, spot_check=c.spot_check,
                                   metrics=dict.fromkeys(self.metrics, "")),
            timeline_source="nsys" if self.art[rank].timeline else "kineto",
            artifacts=self.art[rank], warnings=list(self.top.warnings))

    def finish(self, status: RunStatus, error: str | None = None) -> None:
        self.top.status, self.top.error = status.value, error  # type: ignore[assignment]
        for entry in self.top.ranks:
            entry.status = status.value  # type: ignore[assignment]
            write_manifest(rank_dir(self.run_dir, entry.rank), self.rank_manifest(entry.rank, status, error))
        write_ranks_manifest(self.run_dir, self.top)


def _move(src: Path, dst: Path) -> Path:
    if not src.is_file():
        raise ToolFailedError(f"{src} was not written; the tool did not expand %q{{RANK}} or the rank failed")
    shutil.move(src, dst)
    return dst


def capture_ranks(workload: str | Path, config: CaptureConfig, nproc_per_node: int, *,
                  progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> Path:
    """Capture every phase on ``nproc_per_node`` ranks; returns the multi-rank run directory."""
    path = checked_workload_path(workload)
    check_gpu_count(visible_gpu_count(config.python), nproc_per_node)
    # clock locking is per GPU; not done per rank yet
    config = dataclasses.replace(config, clocks=ClockPolicy.OFF)
    cap = _RankCapture(path, config, nproc_per_node, new_run_dir(config.out_dir, path), progress, cancel)
    try:
        write_ranks_manifest(cap.run_dir, cap.top)
        cap.kineto()
        cap.timeline()
        cap.counters()
        cap.say("manifests", "writing")
        cap.finish(RunStatus.COMPLETE)
    except BaseException as err:
        cap.finish(RunStatus.FAILED, str(err) or type(err).__name__)
        raise
    finally:
        shutil.rmtree(cap.cache_dir, ignore_errors=True)
    if config.attribute:
        from profiler_core.distributed.attribute import attribute_ranks

        attribute_ranks(cap.run_dir)
    return cap.run_dir
