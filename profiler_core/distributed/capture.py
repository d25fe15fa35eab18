"""``capture_ranks(workload, config, nproc_per_node)``: one capture session, every phase once per rank under torchrun.

    kineto     torchrun <harness> --phase kineto --out <run>/rank{rank}/kineto.json
    timeline   torchrun --no-python nsys ... -o timeline_rank%q{RANK} <harness> --phase region
    counters   torchrun --no-python ncu --target-processes all ... -o counters_rank%q{RANK} <harness> ...
    split      each rank's report into <run>/rank<N>/, exported (sqlite, base-unit CSV)
    check      every rank's phases against its own Kineto trace (the determinism check)
    manifests  <run>/rank<N>/manifest.json (a normal run manifest) + <run>/manifest.json (the ranks)

:class:`RankSession` is the capture's own :class:`~profiler_core.capture.pipeline.CaptureSession`
with the rank as a dimension: the same manifest (phases, clocks NVML observed, versions), the
same child runner and the same determinism check, written into every rank's run directory.
The harness joins the process group itself (see :mod:`profiler_core.capture.harness`). All ranks
compile the same graph with one Inductor cache; the Inductor artifacts are copied into every
rank's ``inductor/`` so each ``rank<N>/`` is a complete run directory.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import profiler_core
from profiler_core.capture import phases
from profiler_core.capture.chip import GpuInfo, detect_gpu, select_counters
from profiler_core.capture.config import CaptureConfig, ClockPolicy, CounterMode, HarnessPhase, ReplayMode
from profiler_core.capture.inductor_artifacts import pack_torch_trace
from profiler_core.capture.pipeline import CaptureSession, Tools, environment_subset, find_tools
from profiler_core.capture.runner import failure_summary
from profiler_core.distributed import launch
from profiler_core.errors import ProfilerError, ToolFailedError, ToolNotFoundError
from profiler_core.rundir import RankEntry, RanksManifest, rank_dir, read_ranks_manifest, write_ranks_manifest
from profiler_core.rundir.create import new_run_dir
from profiler_core.rundir.layout import (
    COUNTERS_REPORT_NAME,
    INDUCTOR_DIR,
    KINETO_NAME,
    OUTPUT_CODE_LOG,
    TIMELINE_REPORT_NAME,
    TORCH_TRACE_ARCHIVE,
    TORCH_TRACE_DIR,
)
from profiler_core.rundir.manifest import Artifacts, RunManifest, write_manifest
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


class RankSession(CaptureSession):
    """One capture of ``nproc`` ranks: the capture session, each phase launched once for all ranks."""

    def __init__(self, workload: Path, config: CaptureConfig, gpu: GpuInfo, tools: Tools, run_dir: Path,
                 progress: ProgressFn | None, cancel: threading.Event | None, nproc: int) -> None:
        super().__init__(workload, config, gpu, tools, run_dir, progress, cancel)
        self.nproc = nproc
        self.env = launch.distributed_env(self.env)
        self.manifest.environment = environment_subset(self.env)
        self.plan = ["kineto", "timeline", "counters", "check"] + (["attribute"] if config.attribute else [])
        self.art: dict[int, Artifacts] = {r: Artifacts() for r in range(nproc)}
        self.checked: dict[int, RunManifest] = {}  # each rank's determinism record and counter rows
        self.top = RanksManifest(
            operator_profiler=profiler_core.__version__, created_at=self.manifest.created_at,
            workload=str(workload), world_size=nproc, launcher=launch.torchrun_prefix(config.python, nproc),
            ranks=[RankEntry(rank=r, dir=rank_dir(Path("."), r).as_posix()) for r in range(nproc)],
            environment=self.manifest.environment)
        if nproc > 1 and config.clocks is not ClockPolicy.OFF:
            self.manifest.warnings.append(
                f"clocks observed on {gpu.name} (NVML index {gpu.nvml_index}, rank 0's GPU) for every rank")
        for r in range(nproc):
            rank_dir(run_dir, r).mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------ manifests

    def rank_manifest(self, rank: int) -> RunManifest:
        """Rank ``rank``'s manifest: the session's, with the rank's device, environment and artifacts."""
        m = self.manifest.model_copy(deep=True)
        m.workload.device = f"cuda:{rank}"
        m.environment = {**m.environment, "RANK": str(rank), "WORLD_SIZE": str(self.nproc)}
        m.artifacts = self.art[rank].model_copy()
        m.timeline_source = "nsys" if m.artifacts.timeline else "kineto"
        checked = self.checked.get(rank)
        if checked is not None:
            m.determinism, m.counters.rows = checked.determinism, checked.counters.rows
        return m

    def save(self) -> None:
        """Every rank's manifest, then the top-level one (atomically each)."""
        status = self.manifest.status.value
        self.top.status, self.top.error = status, self.manifest.error  # type: ignore[assignment]
        self.top.warnings = list(self.manifest.warnings)
        for entry in self.top.ranks:
            entry.status = status  # type: ignore[assignment]
            write_manifest(rank_dir(self.run_dir, entry.rank), self.rank_manifest(entry.rank))
        write_ranks_manifest(self.run_dir, self.top)

    # ------------------------------------------------------------ phases

    def harness_args(self, phase: HarnessPhase, out: Path | None = None, provenance: bool = False) -> list[str]:
        """The harness arguments (no interpreter: torchrun starts it) for ``phase``."""
        c = self.config
        return phases.harness_command([], workload=self.workload, phase=phase, compile_mode=c.compile_mode,
                                      warmup=c.warmup, iters=c.iters, device=c.device, seed=c.seed, out=out,
                                      provenance=provenance)

    def run_all_ranks(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        """Run one phase for every rank (recorded, clocks observed); a failing rank fails the phase."""
        record, result, _ = self.run_child(name, command, env=env)
        self.raise_workload_error(record, result)
        if result.returncode != 0:
            raise ToolFailedError(f"{name} phase failed on some rank (exit {result.returncode}: "
                                  f"{failure_summary(result)}); see {result.stderr_path}")

    def kineto(self) -> None:
        self.say("kineto", f"running on {self.nproc} ranks (cold compile)")
        inductor = self.run_dir / INDUCTOR_DIR
        inductor.mkdir(exist_ok=True)
        env = phases.kineto_env(self.env, torch_trace_dir=inductor / TORCH_TRACE_DIR,
                                output_code_log=inductor / OUTPUT_CODE_LOG)
        out = self.run_dir / "rank{rank}" / KINETO_NAME
        cmd = launch.torchrun_command(self.config.harness_argv(), self.nproc,
                                      self.harness_args(HarnessPhase.KINETO, out=out, provenance=True))
        record, result, _ = self.run_child("kineto", cmd, env=env)
        self.raise_workload_error(record, result)
        if result.returncode != 0:
            raise ToolFailedError(f"kineto phase failed on some rank (exit {result.returncode}: "
                                  f"{failure_summary(result)}); see {result.stderr_path}")
        kernels = self.absorb_harness(self.harness_result(record, result))
        shared = [name for name in (TORCH_TRACE_ARCHIVE, OUTPUT_CODE_LOG) if name != TORCH_TRACE_ARCHIVE
                  or pack_torch_trace(inductor / TORCH_TRACE_DIR, inductor / TORCH_TRACE_ARCHIVE)]
        for r, art in self.art.items():
            here = rank_dir(self.run_dir, r)
            if not (here / KINETO_NAME).is_file():
                raise ToolFailedError(f"rank {r} wrote no Kineto trace; see {self.run_dir / 'logs'}")
            art.kineto = KINETO_NAME
            for name in shared:
                if (inductor / name).is_file() and (inductor / name).stat().st_size > 0:
                    (here / INDUCTOR_DIR).mkdir(exist_ok=True)
                    shutil.copy2(inductor / name, here / INDUCTOR_DIR / name)
                    field = "torch_trace" if name == TORCH_TRACE_ARCHIVE else "output_code"
                    setattr(art, field, f"{INDUCTOR_DIR}/{name}")
        self.say("kineto", f"done ({kernels} kernels per rank)")

    def timeline(self) -> None:
        if not self.config.nsys or self.tools.nsys is None:
            self.manifest.warnings.append("nsys skipped; each rank's Kineto trace is its timeline")
            self.say("timeline", "skipped")
            return
        self.say("timeline", f"running nsys on {self.nproc} ranks")
        nsys = self.tools.nsys
        tool = phases.nsys_profile_command(nsys, report_base=launch.rank_report_base(self.run_dir, "timeline"),
                                           app=[*self.config.harness_argv(), *self.harness_args(HarnessPhase.REGION)])
        self.run_all_ranks("timeline", launch.wrapped_per_rank(self.config.python, self.nproc, tool))
        for r, art in self.art.items():
            report = _move(launch.rank_report_path(self.run_dir, "timeline", r, ".nsys-rep"),
                           rank_dir(self.run_dir, r) / TIMELINE_REPORT_NAME)
            sqlite = report.with_suffix(".sqlite")
            self.run_all_ranks(f"timeline-export-rank{r}",
                               phases.nsys_export_command(nsys, report=report, sqlite_out=sqlite))
            art.timeline_report, art.timeline = report.name, sqlite.name
        self.manifest.timeline_source = "nsys"
        self.say("timeline", "done")

    def counters(self) -> None:
        if self.config.counters is CounterMode.NONE or self.tools.ncu is None:
            self.say("counters", "skipped")
            return
        ncu = self.tools.ncu
        selection = select_counters(self.gpu.chip, None)
        self.manifest.counters.metrics = dict(selection.ncu_names)
        replay = "kernel" if self.config.replay_mode is ReplayMode.AUTO else self.config.replay_mode.value
        self.say("counters", f"running ncu ({self.config.counters.value}, {replay} replay) on {self.nproc} ranks")
        tool = phases.ncu_profile_command(
            ncu, metrics=selection.metrics, report_base=launch.rank_report_base(self.run_dir, "counters"),
            app=[*self.config.harness_argv(), *self.harness_args(HarnessPhase.REGION)],
            mode=self.config.counters, replay_mode=replay,
            launch_count=phases.ncu_launch_count(self.config.counters, spot_check=self.config.spot_check),
            clock_control=self.config.ncu_clock_control)
        self.run_all_ranks("counters", launch.wrapped_per_rank(self.config.python, self.nproc,
                                                               launch.ncu_all_processes(tool)))
        for r, art in self.art.items():
            report = _move(launch.rank_report_path(self.run_dir, "counters", r, ".ncu-rep"),
                           rank_dir(self.run_dir, r) / COUNTERS_REPORT_NAME)
            csv = report.with_suffix(".csv")
            record, result, _ = self.run_child(f"counters-import-rank{r}",
                                               phases.ncu_import_command(ncu, report=report, metrics=selection.metrics),
                                               stdout_path=csv)
            if result.returncode != 0:
                raise ToolFailedError(f"ncu --import of {report} failed: {failure_summary(result)}")
            art.counters_report, art.counters_csv = report.name, csv.name
        self.say("counters", "done")

    def check(self) -> None:
        """Every rank's phases against that rank's Kineto trace."""
        self.say("check", f"comparing phases on {self.nproc} ranks")
        for r in range(self.nproc):
            manifest = self.rank_manifest(r)
            self.checked[r] = manifest
            self.check_phases_of(rank_dir(self.run_dir, r), manifest)
        counts = sorted({m.determinism.kernels or 0 for m in self.checked.values()})
        self.say("check", f"done: every rank's phases agree ({', '.join(map(str, counts))} kernels)")

    def attribute(self) -> None:
        """Optional: attribute every rank (rank<N>/profile.json) and merge them (ranks.json)."""
        from profiler_core.distributed.attribute import attribute_ranks

        self.say("attribute", "attributing every rank")
        self.save()
        attribute_ranks(self.run_dir)
        self.top = read_ranks_manifest(self.run_dir)  # now naming each rank's profile
        self.say("attribute", "done: ranks.json")


def capture_ranks(workload: str | Path, config: CaptureConfig, nproc_per_node: int, *,
                  progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> Path:
    """Capture every phase on ``nproc_per_node`` ranks; returns the multi-rank run directory."""
    path = checked_workload_path(workload)
    check_gpu_count(visible_gpu_count(config.python), nproc_per_node)
    if config.clocks is ClockPolicy.LOCK:  # locking is per GPU, and the session locks one
        raise ProfilerError("--clocks lock is not supported with --nproc-per-node; use --clocks observe")
    gpu = detect_gpu(config.device)
    tools = find_tools(config)
    run_dir = new_run_dir(config.out_dir, path)
    RankSession(path, dataclasses.replace(config, ranks=nproc_per_node), gpu, tools, run_dir, progress, cancel,
                nproc_per_node).run()
    return run_dir


def _move(src: Path, dst: Path) -> Path:
    if not src.is_file():
        raise ToolFailedError(f"{src} was not written; the tool did not expand %q{{RANK}} or the rank failed")
    shutil.move(src, dst)
    return dst
