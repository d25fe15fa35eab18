"""What each capture phase costs, beside the floor of one plain run (needs an NVIDIA GPU + ncu).

For every workload (default: the examples/ models) this measures, in one go:

* the floor: one plain harness run (process start, imports, compile, warmup, measured
  iterations, no profiler), once with a cold Inductor cache and once warm;
* a default capture (per-config counters, nsys timeline): wall time of every phase;
* full-mode counters (every launch, kernel replay), and with --dedup-iterations;
* full-mode counters under ncu application replay (the published method's choice).

It prints a markdown table and writes the figures as JSON. Device time is precious: skip
parts with --skip-full / --skip-dedup / --skip-application-replay / --skip-floor.

    python benchmarks/bench_capture.py --json-out capture_bench.json
    python benchmarks/bench_capture.py examples/gpt2.py --skip-application-replay --json-out gpt2.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler_core.atomic_write import write_text_atomic  # noqa: E402
from profiler_core.capture import phases  # noqa: E402
from profiler_core.capture.config import CaptureConfig, CompileMode, HarnessPhase  # noqa: E402
from profiler_core.capture.harness import parse_result  # noqa: E402
from profiler_core.capture.pipeline import capture  # noqa: E402
from profiler_core.capture.runner import ProcessResult, failure_summary, run_process  # noqa: E402
from profiler_core.errors import ProfilerError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORKLOADS = [REPO / "examples" / name for name in ("gpt2.py", "sdpa_attention.py", "lstm_encoder.py")]


def plain_harness_runs(workload: Path, args: argparse.Namespace, work: Path, labels: Iterable[str],
                       ) -> Iterator[tuple[str, ProcessResult, dict[str, Any] | None, Path]]:
    """Plain harness runs of ``workload``, one per label, sharing a fresh Inductor cache (the first
    compiles): (label, process, the harness's result line, its log directory) each."""
    cache = Path(tempfile.mkdtemp(prefix="oprof-bench-cache-", dir=work))
    env = phases.phase_env(os.environ, inductor_cache=cache, pythonpath=REPO)
    command = phases.harness_command(
        [sys.executable, "-m", "profiler_core.capture.harness"], workload=workload, phase=HarnessPhase.PLAIN,
        compile_mode=CompileMode(args.compile_mode), warmup=args.warmup, iters=args.iters, device="cuda",
        seed=0)
    try:
        for label in labels:
            logs = work / f"plain-{workload.stem}-{label}"
            result = run_process(command, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log",
                                 env=env, timeout_s=args.phase_timeout, label=f"plain {label}")
            yield label, result, parse_result((logs / "stdout.log").read_text(errors="replace")), logs
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def plain_runs(workload: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Two plain harness runs sharing a fresh Inductor cache: cold (compiles), then warm."""
    out: dict[str, Any] = {}
    for label, result, data, logs in plain_harness_runs(workload, args, work, ("cold", "warm")):
        out[f"{label}_s"] = round(result.duration_s, 2)
        out[f"{label}_measured_ms"] = (data or {}).get("measured_ms")
        if result.returncode != 0:
            out["error"] = f"plain {label} run exited {result.returncode}: {failure_summary(result)} (logs: {logs})"
            break
    return out


def add_common_arguments(parser: argparse.ArgumentParser, *, workloads: list[Path], warmup: int, iters: int,
                         phase_timeout: float) -> None:
    """The options every capture benchmark takes: workloads, JSON output, compile mode, iterations, work dir."""
    parser.add_argument("workloads", nargs="*", type=Path, default=workloads)
    parser.add_argument("--json-out", type=Path, required=True, help="where the figures go (JSON)")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--phase-timeout", type=float, default=phase_timeout)
    parser.add_argument("--work-dir", type=Path, help="keep run directories here (default: temp, removed)")


def one_capture(workload: Path, label: str, config: CaptureConfig) -> dict[str, Any]:
    """A capture's wall time per phase, total, and what ncu measured."""
    start = time.monotonic()
    try:
        manifest = capture(workload, config).manifest
    except ProfilerError as err:
        return {"error": str(err), "wall_s": round(time.monotonic() - start, 2)}
    per_phase: dict[str, float] = {}
    for record in manifest.phases:
        group = record.name.split("-")[0]  # "timeline-export" counts with "timeline", and so on
        per_phase[group] = round(per_phase.get(group, 0.0) + record.duration_s, 2)
    return {
        "label": label,
        "phases_s": per_phase,
        "total_s": round(manifest.total_duration_s, 2),
        "wall_s": round(time.monotonic() - start, 2),
        "ncu_rows": manifest.counters.rows,
        "kernels": manifest.determinism.kernels,
        "replay_mode": manifest.counters.replay_mode,
        "launch_count": manifest.counters.launch_count,
        "timeline_source": manifest.timeline_source,
        "warnings": manifest.warnings,
    }


def bench_workload(workload: Path, args: argparse.Namespace, work: Path,
                   save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The floor and every capture of one workload; ``save`` gets the figures after each step."""
    base = CaptureConfig(compile_mode=args.compile_mode, warmup=args.warmup, iters=args.iters,
                         phase_timeout_s=args.phase_timeout)
    runs: dict[str, Any] = {}
    floor = {} if args.skip_floor else plain_runs(workload, args, work)
    result = {"workload": str(workload), "floor": floor, "runs": runs}
    if save is not None:
        save(result)
    plans: list[tuple[str, dict[str, Any]]] = [("per-config", {})]
    if not args.skip_full:
        plans.append(("full (kernel replay)", {"counters": "full", "nsys": False, "replay_mode": "kernel"}))
    if not args.skip_dedup:
        plans.append(("full, dedup iterations", {"counters": "full", "nsys": False, "dedup_iterations": True,
                                                 "replay_mode": "kernel"}))
    if not args.skip_application_replay:
        plans.append(("full (application replay)", {"counters": "full", "nsys": False,
                                                    "replay_mode": "application"}))
    for label, changes in plans:
        out_dir = work / f"{workload.stem}-{label.split()[0].strip(',')}-{len(runs)}"
        config = dataclasses.replace(base, out_dir=out_dir, **changes)
        print(f"[bench] {workload.name}: {label} ...", file=sys.stderr, flush=True)
        runs[label] = one_capture(workload, label, config)
        if save is not None:
            save(result)
    return result


def markdown(results: list[dict[str, Any]]) -> str:
    """One table: every capture's phases beside the floor."""
    lines = ["| workload | run | kineto s | timeline s | counters s | total s | ncu rows / kernels "
             "| counters / floor |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        name = Path(res["workload"]).name
        floor = res["floor"].get("warm_s")
        if res["floor"]:
            cold = res["floor"].get("cold_s")
            lines.append(f"| {name} | plain run, cold cache (floor) | | | | {cold} | | |")
            lines.append(f"| {name} | plain run, warm cache (floor) | | | | {floor} | | 1.0 |")
        for label, run in res["runs"].items():
            if "error" in run:
                lines.append(f"| {name} | {label} | error: {run['error'][:80]} | | | | | |")
                continue
            p = run["phases_s"]
            counters = p.get("counters")
            ratio = f"{counters / floor:.1f}" if counters and floor else ""
            rows = f"{run['ncu_rows']} / {run['kernels']}" if run["ncu_rows"] is not None else ""
            lines.append(f"| {name} | {label} | {p.get('kineto', '')} | {p.get('timeline', '')} | "
                         f"{counters or ''} | {run['total_s']} | {rows} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, workloads=DEFAULT_WORKLOADS, warmup=2, iters=2, phase_timeout=1800.0)
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument("--skip-full", action="store_true")
    parser.add_argument("--skip-dedup", action="store_true")
    parser.add_argument("--skip-application-replay", action="store_true")
    args = parser.parse_args(argv)
    missing = [str(w) for w in args.workloads if not w.is_file()]
    if missing:
        print(f"no such workload: {', '.join(missing)}", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="oprof-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []

    def save(partial: dict[str, Any]) -> None:
        write_text_atomic(args.json_out, json.dumps({"results": [*results, partial], "complete": False}, indent=1))

    try:
        for workload in args.workloads:
            # figures are saved after every step: a bench stopped part-way keeps what it measured
            results.append(bench_workload(workload.resolve(), args, work, save=save))
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    table = markdown(results)
    print(table)
    write_text_atomic(args.json_out, json.dumps({"results": results, "markdown": table, "complete": True}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
