"""``capture(workload, config)``: run every phase of one capture into a run directory.

    probe (--clocks lock)  the sustained SM clock under a matmul load (cached per GPU)
    kineto                 torch.profiler trace + Inductor provenance and output code; cold,
                           fresh Inductor cache, which every later phase then reuses
    timeline               nsys on the measured region -> timeline.sqlite (else Kineto serves)
    counters               ncu on the measured region -> counters.ncu-rep + counters.csv
    check                  same kernels, order and grid/block in every phase
    attribute (optional)   profile.json

Each phase is its own process (torch.profiler and nsys cannot share one) run by
:mod:`profiler_core.capture.runner`. The manifest is rewritten after every phase, so a
failure or Ctrl-C leaves an honest record of what ran.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import profiler_core
from profiler_core.capture import phases
from profiler_core.capture.chip import GpuInfo, detect_gpu
from profiler_core.capture.clocks import (
    ClockObserver,
    ClockReader,
    cached_lock_mhz,
    lock_mhz_from_probe,
    open_clock_reader,
    store_lock_mhz,
)
from profiler_core.capture.config import CaptureConfig, ClockPolicy, CounterMode, HarnessPhase
from profiler_core.capture.determinism import PhaseLaunches, check_phases, load_phase_launches
from profiler_core.capture.harness import WORKLOAD_ERROR_EXIT, parse_result, workload_error_line
from profiler_core.capture.inductor_artifacts import pack_torch_trace
from profiler_core.capture.runner import ProcessResult, failure_summary, run_process
from profiler_core.capture.spot_check import counter_spread, load_counter_rows
from profiler_core.capture.tools import find_ncu, find_nsys, find_nvidia_smi, tool_version
from profiler_core.errors import (
    CaptureCancelledError,
    DeterminismError,
    ProfilerError,
    ToolFailedError,
    ToolNotFoundError,
    WorkloadError,
)
from profiler_core.metrics.chips import chip_for_capability
from profiler_core.rundir.create import new_run_dir, utc_now
from profiler_core.rundir.layout import (
    INDUCTOR_DIR,
    KINETO_NAME,
    LOGS_DIR,
    OUTPUT_CODE_LOG,
    PROFILE_NAME,
    TORCH_TRACE_ARCHIVE,
    TORCH_TRACE_DIR,
)
from profiler_core.rundir.manifest import (
    Artifacts,
    ClockRecord,
    CounterRecord,
    DeterminismRecord,
    GpuRecord,
    PhaseRecord,
    PhaseStatus,
    RunManifest,
    RunStatus,
    WorkloadRecord,
    write_manifest,
)
from profiler_core.schema import Profile, ToolVersions
from profiler_core.workload import checked_workload_path, workload_identity

ProgressFn = Callable[[str, int, int, str], None]

_ENV_PREFIXES = ("CUDA_", "TORCH", "PYTORCH_", "TRITON_", "NVIDIA_", "CUBLAS", "CUDNN", "NCCL_",
                 "INDUCTOR_", "OPROF_", "OMP_NUM_THREADS", "LD_LIBRARY_PATH", "PYTHONPATH")
_ENV_SECRETS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


@dataclass(frozen=True)
class CaptureResult:
    """Where a capture wrote its files, its manifest, and the profile it wrote (when it attributed)."""

    run_dir: Path
    manifest: RunManifest
    profile: Profile | None = None


def environment_subset(env: dict[str, str]) -> dict[str, str]:
    """The variables that can change what a capture measures (no secrets)."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(_ENV_PREFIXES) and not any(s in k.upper() for s in _ENV_SECRETS)}


@dataclass(frozen=True)
class Tools:
    ncu: Path | None
    nsys: Path | None
    nsys_missing: str | None
    nvidia_smi: Path | None


def find_tools(config: CaptureConfig) -> Tools:
    ncu = find_ncu() if config.counters is not CounterMode.NONE else None
    nsys: Path | None = None
    missing: str | None = None
    if config.nsys:
        try:
            nsys = find_nsys(ncu=ncu if ncu is not None else _quiet_ncu())
        except ToolNotFoundError as err:
            missing = str(err)
    smi = find_nvidia_smi() if config.clocks is ClockPolicy.LOCK else None
    return Tools(ncu=ncu, nsys=nsys, nsys_missing=missing, nvidia_smi=smi)


def _quiet_ncu() -> Path | None:
    try:
        return find_ncu()
    except ToolNotFoundError:
        return None


class CaptureSession:
    """One capture in progress: its run directory, manifest and phase runner."""

    def __init__(self, workload: Path, config: CaptureConfig, gpu: GpuInfo, tools: Tools, run_dir: Path,
                 progress: ProgressFn | None, cancel: threading.Event | None) -> None:
        self.workload, self.config, self.gpu, self.tools, self.run_dir = workload, config, gpu, tools, run_dir
        self.progress, self.cancel = progress, cancel
        self.profile: Profile | None = None  # set by attribute()
        if config.inductor_cache_dir is None:
            self.cache_dir = Path(tempfile.mkdtemp(prefix="oprof-inductor-"))
        else:
            self.cache_dir = Path(config.inductor_cache_dir)  # made by capture() before the run dir
        package_root = Path(profiler_core.__file__).resolve().parent.parent
        self.env = phases.phase_env(os.environ, inductor_cache=self.cache_dir, pythonpath=package_root)
        self.plan = (["probe"] if config.clocks is ClockPolicy.LOCK else []) + [
            "kineto", "timeline", "counters", "check"] + (["attribute"] if config.attribute else [])
        self.kernels_per_iteration: int | None = None
        self.kineto_kernels: int | None = None
        self.reader: ClockReader | None = None
        self.manifest = RunManifest(
            operator_profiler=profiler_core.__version__,
            created_at=utc_now(),
            workload=WorkloadRecord(
                path=str(workload), sha256=hashlib.sha256(workload.read_bytes()).hexdigest(),
                identity=workload_identity(workload),
                compile_mode=config.compile_mode.value, warmup_iterations=config.warmup,
                measured_iterations=config.iters, device=config.device, seed=config.seed,
                python=config.python,
            ),
            gpu=GpuRecord(
                name=gpu.name, chip=gpu.chip, sm_count=gpu.sm_count, nvml_index=gpu.nvml_index,
                uuid=gpu.uuid, memory_total_bytes=gpu.memory_total_bytes,
                compute_capability=(f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}"
                                    if gpu.compute_capability else None),
            ),
            versions=ToolVersions(
                driver=gpu.driver_version, operator_profiler=profiler_core.__version__,
                ncu=tool_version(tools.ncu) if tools.ncu else None,
                nsys=tool_version(tools.nsys) if tools.nsys else None,
            ),
            environment=environment_subset(self.env),
            clocks=ClockRecord(policy=config.clocks.value),
            counters=CounterRecord(
                mode=config.counters.value, replay_mode_requested=config.replay_mode.value,
                spot_check=config.spot_check, dedup_iterations=config.dedup_iterations,
                clock_control=config.ncu_clock_control,
            ),
            artifacts=Artifacts(),
        )
        if phases.ENV_DISABLE_CACHES in os.environ:
            self.manifest.warnings.append(
                f"{phases.ENV_DISABLE_CACHES} was set and is ignored: every phase must share one "
                "Inductor cache so that all run the same kernels")

    # ------------------------------------------------------------ plumbing

    def say(self, phase: str, message: str) -> None:
        """Report progress: ``progress(phase, step, total, message)``."""
        if self.progress is not None:
            step = self.plan.index(phase) + 1 if phase in self.plan else len(self.plan)
            self.progress(phase, step, len(self.plan), message)

    def save(self) -> None:
        """Rewrite manifest.json (atomically)."""
        write_manifest(self.run_dir, self.manifest)

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CaptureCancelledError("capture cancelled; the run directory holds what was done")

    def harness_cmd(self, phase: HarnessPhase, *, out: Path | None = None, provenance: bool = False,
                    workload: bool = True) -> list[str]:
        """The harness command for ``phase`` under this capture's measurement conditions."""
        c = self.config
        return phases.harness_command(
            c.harness_argv(), workload=self.workload if workload else None, phase=phase,
            compile_mode=c.compile_mode, warmup=c.warmup, iters=c.iters, device=c.device, seed=c.seed,
            out=out, provenance=provenance, probe_s=c.probe_s if phase is HarnessPhase.PROBE else None)

    def run_child(self, name: str, command: list[str], *, env: dict[str, str] | None = None,
                  stdout_path: Path | None = None) -> tuple[PhaseRecord, ProcessResult, ClockObserver | None]:
        """Run one child, record it in the manifest (whatever happens), return its outcome."""
        self._check_cancel()
        logs = self.run_dir / LOGS_DIR
        out = stdout_path or logs / f"{name}.stdout.log"
        err = logs / f"{name}.stderr.log"
        record = PhaseRecord(name=name, status=PhaseStatus.OK, command=command, started_at=utc_now(),
                             stdout_log=os.path.relpath(out, self.run_dir),
                             stderr_log=os.path.relpath(err, self.run_dir))
        self.manifest.phases.append(record)
        self.save()
        observer = ClockObserver(self.reader).start() if self.reader is not None else None
        start = time.monotonic()
        try:
            result = run_process(command, stdout_path=out, stderr_path=err, env=env or self.env,
                                 timeout_s=self.config.phase_timeout_s, cancel=self.cancel,
                                 label=f"{name} phase")
        except (CaptureCancelledError, KeyboardInterrupt):
            record.status = PhaseStatus.CANCELLED
            raise
        except ToolFailedError as exc:
            record.status, record.note = PhaseStatus.FAILED, str(exc)
            raise
        finally:
            record.duration_s = round(time.monotonic() - start, 3)
            if observer is not None:
                record.clocks = observer.stop()
            self.save()
        record.exit_status = result.returncode
        if result.returncode != 0:
            record.status = PhaseStatus.FAILED
        return record, result, observer

    def raise_workload_error(self, record: PhaseRecord, result: ProcessResult) -> None:
        """Re-raise a workload fault the harness reported (also through nsys/ncu)."""
        for path in (result.stderr_path, result.stdout_path):
            try:
                line = workload_error_line(path.read_text(errors="replace"))
            except OSError:
                line = None
            if line:
                record.status, record.note = PhaseStatus.FAILED, line
                raise WorkloadError(line)
        if result.returncode == WORKLOAD_ERROR_EXIT and record.name in ("kineto", "probe"):  # direct runs
            raise WorkloadError(f"{self.workload}: the harness exited {WORKLOAD_ERROR_EXIT} "
                                f"({failure_summary(result)}); see {result.stderr_path}")

    def harness_result(self, record: PhaseRecord, result: ProcessResult) -> dict:
        """The harness's one-line result, stored on the phase record."""
        data = parse_result(result.stdout_path.read_text(errors="replace"))
        if data is None:
            raise ToolFailedError(
                f"{record.name} phase: the harness printed no result line ({failure_summary(result)}); "
                f"see {result.stderr_path}")
        record.harness = data
        return data

    # ------------------------------------------------------------ phases

    def probe(self) -> None:
        """--clocks lock: find the sustained SM clock (cached per GPU)."""
        if self.gpu.nvml_index is None:
            raise ToolFailedError("--clocks lock needs NVML to identify the GPU for nvidia-smi; "
                                  "use --clocks observe")
        cached = cached_lock_mhz(self.gpu.cache_key)
        if cached is not None:
            self.manifest.clocks.locked_sm_mhz, self.manifest.clocks.lock_source = cached, "cached"
            self.say("probe", f"skipped: lock clock {cached} MHz cached for this GPU")
            return
        if self.reader is None:
            raise ToolFailedError("--clocks lock probes the GPU's clock with NVML, which is unavailable "
                                  "here; use --clocks observe")
        self.say("probe", "running")
        command = self.harness_cmd(HarnessPhase.PROBE, workload=False)
        record, result, observer = self.run_child("probe", command)
        self.raise_workload_error(record, result)
        if result.returncode != 0:
            raise ToolFailedError(f"clock probe failed (exit {result.returncode}): {failure_summary(result)}")
        data = self.harness_result(record, result)
        if observer is None or "load_start_unix" not in data:
            raise ToolFailedError("clock probe: no clock samples or load window; use --clocks observe")
        stats = observer.window(float(data["load_start_unix"]), float(data["load_end_unix"]))
        mhz = lock_mhz_from_probe(stats)
        store_lock_mhz(self.gpu.cache_key, mhz)
        self.manifest.clocks.locked_sm_mhz, self.manifest.clocks.lock_source = mhz, "probed"
        self.say("probe", f"done in {record.duration_s:.1f} s: lock at {mhz} MHz")

    def kineto(self) -> None:
        """Phase 1: Kineto trace + Inductor artifacts, cold cache (which it warms)."""
        self.say("kineto", "running (cold compile)")
        inductor = self.run_dir / INDUCTOR_DIR
        trace_dir, output_code = inductor / TORCH_TRACE_DIR, inductor / OUTPUT_CODE_LOG
        inductor.mkdir(parents=True, exist_ok=True)
        env = phases.kineto_env(self.env, torch_trace_dir=trace_dir, output_code_log=output_code)
        command = self.harness_cmd(HarnessPhase.KINETO, out=self.run_dir / KINETO_NAME, provenance=True)
        record, result, _ = self.run_child("kineto", command, env=env)
        self.raise_workload_error(record, result)
        if result.returncode != 0:
            raise ToolFailedError(
                f"kineto phase failed (exit {result.returncode}): {failure_summary(result)}; "
                f"see {result.stderr_path}")
        data = self.harness_result(record, result)
        if not (self.run_dir / KINETO_NAME).is_file():
            raise ToolFailedError(f"kineto phase wrote no trace at {self.run_dir / KINETO_NAME}")
        self.manifest.artifacts.kineto = KINETO_NAME
        if pack_torch_trace(trace_dir, inductor / TORCH_TRACE_ARCHIVE):
            self.manifest.artifacts.torch_trace = f"{INDUCTOR_DIR}/{TORCH_TRACE_ARCHIVE}"
        if output_code.is_file() and output_code.stat().st_size > 0:
            self.manifest.artifacts.output_code = f"{INDUCTOR_DIR}/{OUTPUT_CODE_LOG}"
        elif self.config.compile_mode.value != "eager":
            self.manifest.warnings.append("Inductor wrote no output code; fused kernels fall back to "
                                          "provenance (if any) for their operators")
        kernels = self.absorb_harness(data)
        self.say("kineto", f"done in {record.duration_s:.1f} s ({kernels} kernels)")

    def absorb_harness(self, data: dict) -> object:
        """What the kineto phase's harness reported: the GPU, the versions, the kernels per iteration."""
        info, versions = data.get("device_info") or {}, data.get("versions") or {}
        gpu = self.manifest.gpu
        gpu.sm_count = info.get("sm_count", gpu.sm_count)
        gpu.compute_capability = gpu.compute_capability or info.get("compute_capability")
        gpu.name = gpu.name or info.get("name")
        if gpu.chip is None and gpu.compute_capability:
            major, _, minor = gpu.compute_capability.partition(".")
            if major.isdigit() and minor.isdigit():
                gpu.chip = chip_for_capability((int(major), int(minor)))
        v = self.manifest.versions
        v.torch, v.cuda, v.python = versions.get("torch"), versions.get("cuda"), versions.get("python")
        kernels = data.get("kernels")
        self.kineto_kernels = kernels if isinstance(kernels, int) else None
        if isinstance(kernels, int) and kernels % self.config.iters == 0:
            self.kernels_per_iteration = kernels // self.config.iters
        return kernels

    def timeline(self) -> None:
        """Phase 2: nsys timeline of the measured region; on any failure the Kineto trace serves."""
        from profiler_core.capture.timeline_phase import run_timeline

        run_timeline(self)

    def counters(self) -> None:
        """Phase 3: ncu on the measured region, replay mode by measurement, then a base-unit CSV."""
        from profiler_core.capture.counters_phase import run_counters

        if self.config.counters is CounterMode.NONE:
            self.say("counters", "skipped: --counters none")
            return
        run_counters(self)

    def check(self) -> None:
        """Same kernels, order and sizes in every phase; spot-check spread in per-config mode."""
        self.say("check", "comparing phases")
        found = self.check_phases_of(self.run_dir, self.manifest)
        art, counters = self.manifest.artifacts, self.manifest.counters
        if counters.mode == "per-config" and counters.spot_check > 1 and art.counters_csv:
            rows = load_counter_rows(self.run_dir / art.counters_csv)
            counters.spot_check_spread = counter_spread(rows, counters.metrics, counters.spot_check)
        agreeing = ", ".join(["kineto", *self.manifest.determinism.compared])
        self.say("check", f"done: {len(found.kineto)} kernels agree across {agreeing}")

    def check_phases_of(self, run_dir: Path, manifest: RunManifest) -> PhaseLaunches:
        """The determinism check of one run directory, recorded in its ``manifest`` (raises on a divergence)."""
        art, counters = manifest.artifacts, manifest.counters
        found: PhaseLaunches = load_phase_launches(
            run_dir, kineto=art.kineto or KINETO_NAME,
            timeline=art.timeline if manifest.timeline_source == "nsys" else None,
            counters_csv=art.counters_csv)
        record = DeterminismRecord(checked=True, kernels=len(found.kineto))
        manifest.determinism = record
        try:
            record.compared = check_phases(
                found, counter_mode=counters.mode,
                kernels_per_iteration=self.kernels_per_iteration if counters.dedup_iterations else None)
        except DeterminismError as err:
            record.passed, record.note = False, str(err)
            raise
        record.passed = True
        if found.ncu is not None:
            counters.rows = len(found.ncu)
        return found

    def attribute(self) -> None:
        """Optional: attribute the run and write profile.json (kept for the caller: no re-read)."""
        self.say("attribute", "attributing")
        from profiler_core.attribution import attribute_run
        from profiler_core.profile_io import write_profile

        profile = attribute_run(self.run_dir)
        write_profile(self.run_dir / PROFILE_NAME, profile)
        self.profile = profile
        self.manifest.artifacts.profile = PROFILE_NAME
        self.say("attribute", "done: profile.json")

    # ------------------------------------------------------------ driver

    def run(self) -> CaptureResult:
        start = time.monotonic()
        manifest = self.manifest
        try:
            if self.config.clocks is not ClockPolicy.OFF:
                self.reader, why_not = open_clock_reader(self.gpu.nvml_index)
                if why_not:
                    manifest.warnings.append(why_not)
            self.save()
            if self.config.clocks is ClockPolicy.LOCK:
                self.probe()
            self.kineto()
            self.timeline()
            self.counters()
            self.check()
            manifest.status = RunStatus.COMPLETE
            self.save()  # attribution reads the finished manifest from disk
            if self.config.attribute:
                try:
                    self.attribute()
                except ProfilerError as err:
                    manifest.error = f"attribution failed: {err}"
                    raise
        except (CaptureCancelledError, KeyboardInterrupt) as err:
            manifest.status = RunStatus.CANCELLED
            manifest.error = str(err) or "interrupted"
            raise
        except ProfilerError as err:
            if manifest.status is not RunStatus.COMPLETE:
                manifest.status, manifest.error = RunStatus.FAILED, str(err)
            raise
        except Exception as err:
            manifest.status, manifest.error = RunStatus.FAILED, f"internal error: {type(err).__name__}: {err}"
            raise
        finally:
            manifest.total_duration_s = round(time.monotonic() - start, 3)
            self.save()
            if self.config.inductor_cache_dir is None:
                shutil.rmtree(self.cache_dir, ignore_errors=True)
        return CaptureResult(run_dir=self.run_dir, manifest=manifest, profile=self.profile)


def capture(workload: str | Path, config: CaptureConfig | None = None, *,
            progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> CaptureResult:
    """Capture every phase of ``workload`` into a new run directory and return it with its manifest.

    Fails fast, before creating anything, on a missing workload file, no CUDA GPU, or a
    missing required tool. Afterwards every failure is also recorded in the manifest.
    """
    config = config or CaptureConfig()
    if config.ranks is not None:
        raise ProfilerError(f"ranks={config.ranks}: a capture of several ranks runs under torchrun; call "
                            "profiler_core.api.capture (oprof capture --nproc-per-node N)")
    path = checked_workload_path(workload)
    gpu = detect_gpu(config.device)
    tools = find_tools(config)
    if config.inductor_cache_dir is not None:
        try:
            Path(config.inductor_cache_dir).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ProfilerError(f"{config.inductor_cache_dir}: cannot hold the Inductor cache "
                                f"({err.strerror or err}); give a directory that can be created") from err
    run_dir = new_run_dir(config.out_dir, path)
    return CaptureSession(path, config, gpu, tools, run_dir, progress, cancel).run()
