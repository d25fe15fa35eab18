"""Command lines and environments of each capture phase: pure functions, no side effects.

Every phase runs the same harness with the same compile mode, seed, warmup and measured
iterations; only the wrapper around it changes::

    kineto     <harness> --phase kineto --out kineto.json --provenance
    timeline   nsys profile -t cuda,nvtx ... --capture-range=cudaProfilerApi -o R <harness> --phase region
    counters   ncu --nvtx --profile-from-start off ... -o R <harness> --phase region
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from profiler_core.capture.config import CompileMode, CounterMode, HarnessPhase

# Keys of the child environment the harness phases set.
ENV_INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"
ENV_TORCH_TRACE = "TORCH_TRACE"
ENV_TORCH_LOGS = "TORCH_LOGS"
ENV_TORCH_LOGS_OUT = "TORCH_LOGS_OUT"
# A user's "disable all caches" would make later phases recompile (and maybe pick other
# launch configurations), breaking the one-cache guarantee; the pipeline drops it.
ENV_DISABLE_CACHES = "TORCHINDUCTOR_FORCE_DISABLE_CACHES"


def harness_command(harness: Sequence[str], *, workload: Path | None, phase: HarnessPhase,
                    compile_mode: CompileMode, warmup: int, iters: int, device: str, seed: int,
                    out: Path | None = None, provenance: bool = False,
                    probe_s: float | None = None) -> list[str]:
    """One harness invocation: ``<harness> --phase P --compile-mode M --warmup N --iters N ...``."""
    cmd = [*harness, "--phase", HarnessPhase(phase).value]
    if workload is not None:
        cmd += ["--workload", str(workload)]
    cmd += ["--compile-mode", CompileMode(compile_mode).value, "--warmup", str(warmup),
            "--iters", str(iters), "--device", device, "--seed", str(seed)]
    if out is not None:
        cmd += ["--out", str(out)]
    if provenance:
        cmd.append("--provenance")
    if probe_s is not None:
        cmd += ["--probe-seconds", f"{probe_s:g}"]
    return cmd


def phase_env(base: Mapping[str, str], *, inductor_cache: Path,
              pythonpath: Path | None = None) -> dict[str, str]:
    """Environment shared by every harness process: one Inductor cache, unbuffered output."""
    env = {k: v for k, v in base.items() if k != ENV_DISABLE_CACHES}
    env[ENV_INDUCTOR_CACHE] = str(inductor_cache)
    env["PYTHONUNBUFFERED"] = "1"
    if pythonpath is not None:
        parts = [str(pythonpath)] + [p for p in env.get("PYTHONPATH", "").split(":") if p]
        env["PYTHONPATH"] = ":".join(dict.fromkeys(parts))
    return env


def kineto_env(base: Mapping[str, str], *, torch_trace_dir: Path, output_code_log: Path) -> dict[str, str]:
    """Add Inductor's provenance trace dir and output-code log to a phase environment."""
    env = dict(base)
    env[ENV_TORCH_TRACE] = str(torch_trace_dir)
    logs = [part for part in env.get(ENV_TORCH_LOGS, "").split(",") if part]
    if "output_code" not in logs and "+output_code" not in logs:
        logs.append("output_code")
    env[ENV_TORCH_LOGS] = ",".join(logs)
    env[ENV_TORCH_LOGS_OUT] = str(output_code_log)
    return env


def nsys_profile_command(nsys: Path, *, report_base: Path, app: Sequence[str]) -> list[str]:
    """nsys limited to the measured region: CUDA + NVTX only, no CPU sampling, no context switches.

    ``--capture-range-end=stop`` lets the harness finish after cudaProfilerStop, so it can
    print its result line (the default would shut it down there). ``--cuda-graph-trace=node``
    records each kernel a CUDA graph replays (nsys's default records a replay as one graph
    event and no kernels, so a graphed workload's timeline would hold only its eager launches).
    """
    return [str(nsys), "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none",
            "--cuda-graph-trace=node", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
            "--force-overwrite", "true", "-o", str(report_base), *app]


def nsys_export_command(nsys: Path, *, report: Path, sqlite_out: Path) -> list[str]:
    """``nsys export --type sqlite`` of one report."""
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true",
            "-o", str(sqlite_out), str(report)]


def ncu_launch_count(mode: CounterMode, *, spot_check: int = 1, dedup_iterations: bool = False,
                     kernels_per_iteration: int | None = None) -> int | None:
    """``--launch-count`` for a counter mode: K per configuration, one iteration, or all (None)."""
    if mode is CounterMode.PER_CONFIG:
        return spot_check
    if mode is CounterMode.FULL and dedup_iterations:
        if not kernels_per_iteration:
            raise ValueError("dedup needs the kernel count of one iteration")
        return kernels_per_iteration
    return None


def ncu_profile_command(ncu: Path, *, metrics: Sequence[str], report_base: Path, app: Sequence[str],
                        mode: CounterMode, replay_mode: str, launch_count: int | None,
                        clock_control: str = "none") -> list[str]:
    """ncu on the measured region only (cudaProfilerStart/Stop), the application process only."""
    if mode is CounterMode.NONE:
        raise ValueError("counter mode 'none' runs no ncu")
    if replay_mode not in ("kernel", "application"):
        raise ValueError(f"replay mode {replay_mode!r}: resolve 'auto' before building the command")
    cmd = [str(ncu), "--nvtx", "--profile-from-start", "off", "--target-processes", "application-only",
           "--replay-mode", replay_mode, "--clock-control", clock_control,
           "--metrics", ",".join(metrics)]
    if launch_count is not None:
        cmd += ["--launch-count", str(launch_count)]
    if mode is CounterMode.PER_CONFIG:
        cmd += ["--filter-mode", "per-launch-config"]
    cmd += ["--force-overwrite", "-o", str(report_base), *app]
    return cmd


def ncu_import_command(ncu: Path, *, report: Path, metrics: Sequence[str]) -> list[str]:
    """Export a report's raw page as CSV in base units (no "Kbyte" vs "Mbyte" mixing)."""
    return [str(ncu), "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
            "--metrics", ",".join(metrics)]


def ncu_query_metrics_command(ncu: Path, chip: str) -> list[str]:
    """List the metrics ncu offers on ``chip``."""
    return [str(ncu), "--query-metrics", "--chip", chip]
