"""What a capture adds to the run it measures, held to a budget (needs an NVIDIA GPU, nsys and ncu).

For every workload this runs, with the same warmup and measured iterations:

* the plain run (no profiler): once with a cold Inductor cache, then ``--reps`` times warm;
  the harness times the measured region on the host (wall) and by CUDA events (GPU time);
* one default capture (Kineto, nsys timeline, per-config ncu counters), whose harness reports
  the same two figures for each phase's measured region.

Per phase it prints the inflation against the plain run and checks it against the budget:

* timeline phases (Kineto, nsys): wall per iteration <= 2.0x (+100%) and GPU time per
  iteration <= 1.5x (+50%): the thresholds rocprof-compute's tests hold its tracing to;
* every phase's whole process (start, imports, compile, warmup, region, export) <= 3.0x the
  plain process (the Kineto phase compiles cold, so against the cold plain run; the others
  against the warm one). ncu replays each measured kernel, so its region has no per-iteration
  figure; its process time is what the counters cost.

Kernel time per iteration as each tracer recorded it is printed beside (Kineto and nsys read
the same CUPTI activity records, so the two should agree). Exit status 1 when a figure is over
budget, 2 when a run failed::

    python benchmarks/bench_overhead.py examples/gpt2.py examples/tv_resnet18.py --json-out overhead.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks, for what they share

from bench_capture import add_common_arguments, plain_harness_runs  # noqa: E402

from profiler_core.atomic_write import write_text_atomic  # noqa: E402
from profiler_core.capture.config import CaptureConfig  # noqa: E402
from profiler_core.capture.pipeline import capture  # noqa: E402
from profiler_core.capture.runner import failure_summary  # noqa: E402
from profiler_core.errors import ProfilerError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORKLOADS = [REPO / "examples" / name for name in ("gpt2.py", "tv_resnet18.py")]
BUDGET_WALL = 2.0  # measured region's host time per iteration, x the plain run
BUDGET_GPU = 1.5  # measured region's GPU time (CUDA events) per iteration, x the plain run
BUDGET_PROCESS = 3.0  # a phase's whole process, x the plain process


def plain_runs(workload: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One cold plain run, then ``args.reps`` warm ones, sharing a fresh Inductor cache."""
    runs: list[dict[str, Any]] = []
    labels = ["cold", *(f"warm{i}" for i in range(1, 1 + args.reps))]
    for label, result, data, logs in plain_harness_runs(workload, args, work, labels):
        if result.returncode != 0 or data is None:
            return {"error": f"plain {label} run exited {result.returncode}: {failure_summary(result)} (logs: {logs})"}
        runs.append({"process_s": result.duration_s, "wall_ms": data["region_ms"], "gpu_ms": data.get("gpu_ms")})
    warm = runs[1:] or runs
    return {
        "cold_process_s": round(runs[0]["process_s"], 2),
        "warm_process_s": round(statistics.median(r["process_s"] for r in warm), 2),
        "wall_ms_per_iter": statistics.median(r["wall_ms"] for r in warm) / args.iters,
        "gpu_ms_per_iter": (statistics.median(r["gpu_ms"] for r in warm) / args.iters
                            if all(r["gpu_ms"] is not None for r in warm) else None),
        "runs": runs,
    }


def kernel_ms_per_iter(path: Path | None, reader: Any, iters: int) -> float | None:
    """Summed kernel durations in one tracer's record of the region, per iteration."""
    if path is None or not Path(path).is_file():
        return None
    kernels = reader(path).kernels
    return sum(k.end_ns - k.start_ns for k in kernels) / 1e6 / iters


def captured(workload: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One default capture; per phase its process time and what its harness measured."""
    from profiler_core.ingest import read_kineto, read_nsys
    from profiler_core.rundir import open_run

    config = CaptureConfig(compile_mode=args.compile_mode, warmup=args.warmup, iters=args.iters,
                           phase_timeout_s=args.phase_timeout, out_dir=work / f"capture-{workload.stem}")
    try:
        result = capture(workload, config)
    except ProfilerError as err:
        return {"error": str(err)}
    manifest = result.manifest
    art = open_run(result.run_dir).artifacts()
    out: dict[str, Any] = {"phases": {}, "timeline_source": manifest.timeline_source,
                           "ncu_rows": manifest.counters.rows, "warnings": manifest.warnings}
    for record in manifest.phases:
        group = record.name.split("-")[0]  # an export counts with its phase
        entry = out["phases"].setdefault(group, {"process_s": 0.0})
        entry["process_s"] = round(entry["process_s"] + record.duration_s, 2)
        if record.harness and "region_ms" in record.harness:
            entry["wall_ms_per_iter"] = record.harness["region_ms"] / args.iters
            entry["start_stop_ms"] = record.harness["measured_ms"] - record.harness["region_ms"]
            gpu = record.harness.get("gpu_ms")
            entry["gpu_ms_per_iter"] = None if gpu is None or group == "counters" else gpu / args.iters
    kineto = out["phases"].get("kineto")
    if kineto is not None:
        kineto["kernel_ms_per_iter"] = kernel_ms_per_iter(art.kineto, read_kineto, args.iters)
    timeline = out["phases"].get("timeline")
    if timeline is not None:
        timeline["kernel_ms_per_iter"] = kernel_ms_per_iter(art.nsys, read_nsys, args.iters)
    return out


def judge(plain: dict[str, Any], capture_out: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per phase: its figures, their ratios to the plain run, and the budget verdicts."""
    rows = []
    for name, phase in capture_out["phases"].items():
        floor = plain["cold_process_s"] if name == "kineto" else plain["warm_process_s"]
        row: dict[str, Any] = {"phase": name, **phase, "process_x": phase["process_s"] / floor, "over": []}
        if row["process_x"] > BUDGET_PROCESS:
            row["over"].append(f"process {row['process_x']:.2f}x > {BUDGET_PROCESS}x")
        if name in ("kineto", "timeline") and "wall_ms_per_iter" in phase:
            row["wall_x"] = phase["wall_ms_per_iter"] / plain["wall_ms_per_iter"]
            if row["wall_x"] > BUDGET_WALL:
                row["over"].append(f"wall {row['wall_x']:.2f}x > {BUDGET_WALL}x")
            if phase.get("gpu_ms_per_iter") and plain.get("gpu_ms_per_iter"):
                row["gpu_x"] = phase["gpu_ms_per_iter"] / plain["gpu_ms_per_iter"]
                if row["gpu_x"] > BUDGET_GPU:
                    row["over"].append(f"GPU time {row['gpu_x']:.2f}x > {BUDGET_GPU}x")
        rows.append(row)
    return rows


def _f(value: float | None, fmt: str = ".3f") -> str:
    return "" if value is None else format(value, fmt)


def markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| workload | phase | process s (x plain) | wall ms/iter (x plain) | GPU ms/iter (x plain) "
             "| kernel ms/iter | budget |", "|---|---|---:|---:|---:|---:|---|"]
    for res in results:
        name = Path(res["workload"]).name
        if "error" in res:
            lines.append(f"| {name} | error: {res['error'][:100]} | | | | | |")
            continue
        p = res["plain"]
        lines.append(f"| {name} | plain (cold / warm) | {p['cold_process_s']} / {p['warm_process_s']} | "
                     f"{_f(p['wall_ms_per_iter'])} | {_f(p['gpu_ms_per_iter'])} | | |")
        for row in res["rows"]:
            wall = (f"{_f(row.get('wall_ms_per_iter'))} ({_f(row.get('wall_x'), '.2f')}x)"
                    if "wall_x" in row else "")
            gpu = f"{_f(row.get('gpu_ms_per_iter'))} ({_f(row.get('gpu_x'), '.2f')}x)" if "gpu_x" in row else ""
            verdict = "; ".join(row["over"]) or "within"
            lines.append(f"| {name} | {row['phase']} | {row['process_s']} ({row['process_x']:.2f}x) | {wall} | "
                         f"{gpu} | {_f(row.get('kernel_ms_per_iter'))} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, workloads=DEFAULT_WORKLOADS, warmup=3, iters=10, phase_timeout=1200.0)
    parser.add_argument("--reps", type=int, default=2, help="warm plain runs (their median is the floor)")
    args = parser.parse_args(argv)
    missing = [str(w) for w in args.workloads if not w.is_file()]
    if missing:
        print(f"no such workload: {', '.join(missing)}", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="oprof-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    budget = {"wall_x": BUDGET_WALL, "gpu_x": BUDGET_GPU, "process_x": BUDGET_PROCESS}

    def save(complete: bool) -> None:
        write_text_atomic(args.json_out, json.dumps({"budget": budget, "iters": args.iters, "warmup": args.warmup,
                                                     "results": results, "complete": complete}, indent=1))

    try:
        for workload in args.workloads:
            print(f"[overhead] {workload.name}: plain runs ...", file=sys.stderr, flush=True)
            res: dict[str, Any] = {"workload": workload.name}
            results.append(res)
            plain = plain_runs(workload.resolve(), args, work)
            if "error" in plain:
                res["error"] = plain["error"]
                save(False)
                continue
            res["plain"] = plain
            save(False)
            print(f"[overhead] {workload.name}: capture ...", file=sys.stderr, flush=True)
            cap = captured(workload.resolve(), args, work)
            if "error" in cap:
                res["error"] = cap["error"]
            else:
                res["capture"] = cap
                res["rows"] = judge(plain, cap)
            save(False)  # figures kept after every workload: a run stopped part-way keeps them
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    table = markdown(results)
    print(table)
    save(True)
    if any("error" in r for r in results):
        return 2
    return 1 if any(row["over"] for r in results for row in r.get("rows", [])) else 0


if __name__ == "__main__":
    sys.exit(main())
