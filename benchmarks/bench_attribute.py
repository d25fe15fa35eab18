"""Attribution at scale: synthetic captures of up to 1M kernels built from a real one.

A real H200 capture's parsed records are replicated with shifted times and ids, so every tier
has real-looking work to do (this is benchmark input only, never shipped as a capture):

* ``joinable`` (default): tests/data/h200_joinable, 44 kernels, Kineto + nsys + ncu (one row
  per launch, with ncu's NVTX stacks) + Inductor: all four tiers speak for every kernel;
* ``gpt2``: examples/captures/h200/gpt2/baseline_nsys, 508 kernels, Kineto + nsys + per-config
  ncu + Inductor.

Each size runs in a fresh process with its inputs already parsed; beside it, for the joinable
capture, the floor of ``attribution_floor.py`` (the same joins, tiers, aggregation and Parquet
write in plain numpy and pyarrow, every input in columns) in a fresh process too, and the
ratios engine / floor. The figures are the
attribution (all tiers, aggregation, layer dedup), the write (profile.json, or profile.json
plus its Parquet kernel and operator tables above the columnar threshold), the process's peak
RSS, inputs included, and reading the written profile back (``read_profile``, with its checks).
The last line times the whole ``oprof attribute`` of the shipped GPT-2 capture against the same
library calls (``api.attribute`` and ``write_profile``) in a fresh interpreter without the CLI.

``--inputs columns`` (default) hands the engine the Kineto, nsys and ncu inputs as the readers do,
Arrow tables beneath ``TableRecords`` (records built only if read); ``--inputs records`` as lists
of records.

    python benchmarks/bench_attribute.py [--sizes 572,100k,1M] [--capture joinable|gpt2] [--inputs columns|records]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing
CAPTURES = {
    "joinable": (REPO / "tests" / "data" / "h200_joinable", "kineto.json", "nsys.sqlite", "ncu_full_raw.csv",
                 "torch_trace.tgz"),
    "gpt2": (REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline_nsys", "kineto.json.gz",
             "timeline.sqlite", "counters.csv", "inductor"),
}
GPT2_RUN = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"
# The figures of issue "fast at scale", same machine class: (today, columnar prototype), seconds / MB
FLOORS = {100_000: "issue: 7.2 s / 1.6 GB before; prototype 0.44 s / 454 MB",
          1_000_000: "issue: 78 s CPU / 15.4 GB before; prototype 3.7 s / 1.3 GB"}


def parse_size(text: str) -> int:
    """``572`` / ``100k`` / ``1M`` -> kernels."""
    text = text.strip()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _span(items) -> int:
    return max(i.end_ns for i in items) - min(i.start_ns for i in items) + 1_000


def kineto_steps(kin) -> tuple[int, int, int]:
    """How far each copy of a Kineto trace is shifted: (period ns, correlation id step, External id step)."""
    ext_step = max(o.external_id or 0 for o in kin.cpu_ops) + 1
    corr_step = max(max(k.correlation_id or 0 for k in kin.kernels),
                    max(r.correlation_id or 0 for r in kin.runtime_calls)) + 1
    return _span(kin.kernels + kin.cpu_ops), corr_step, ext_step


def replicate(capture: str, copies: int, *, kineto_only: bool = False):
    """The capture's parsed records, ``copies`` times over, with shifted times, correlation and External ids
    (``kineto_only``: the nsys and ncu inputs once, not copied)."""
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
    from profiler_core.records import KinetoTrace, NcuReport, NsysTimeline

    root, kin_name, nsys_name, ncu_name, ind_name = CAPTURES[capture]
    kin = read_kineto(root / kin_name)
    nsy = read_nsys(root / nsys_name)
    ncu = read_ncu(root / ncu_name)
    ind = read_inductor(root / ind_name)
    per_config = len(ncu.rows) < len(nsy.kernels)

    k_period, corr_step, ext_step = kineto_steps(kin)
    n_period = _span(nsy.kernels + nsy.nvtx_ranges + nsy.runtime_calls)
    ncorr_step = max(max(k.correlation_id or 0 for k in nsy.kernels),
                     max(r.correlation_id or 0 for r in nsy.runtime_calls)) + 1

    def shift(rec, c, period, cstep=None, estep=None):
        changes = {"start_ns": rec.start_ns + c * period, "end_ns": rec.end_ns + c * period}
        if cstep is not None and getattr(rec, "correlation_id", None) is not None:
            changes["correlation_id"] = rec.correlation_id + c * cstep
        if estep is not None and getattr(rec, "external_id", None) is not None:
            changes["external_id"] = rec.external_id + c * estep
        return replace(rec, **changes)

    kin2 = KinetoTrace(
        path=kin.path, metadata=kin.metadata,
        kernels=[shift(k, c, k_period, corr_step, ext_step) for c in range(copies) for k in kin.kernels],
        cpu_ops=[shift(o, c, k_period, None, ext_step) for c in range(copies) for o in kin.cpu_ops],
        runtime_calls=[shift(r, c, k_period, corr_step, ext_step) for c in range(copies) for r in kin.runtime_calls],
    )
    if kineto_only:
        return kin2, nsy, ncu, ind, len(nsy.kernels)
    nsy2 = NsysTimeline(
        path=nsy.path, gpus=nsy.gpus,
        kernels=[shift(k, c, n_period, ncorr_step) for c in range(copies) for k in nsy.kernels],
        runtime_calls=[shift(r, c, n_period, ncorr_step) for c in range(copies) for r in nsy.runtime_calls],
        nvtx_ranges=[shift(r, c, n_period) for c in range(copies) for r in nsy.nvtx_ranges],
    )
    # a per-config counter run measures each configuration's first launches only: its rows stay as they are
    rows = ncu.rows if per_config else [replace(r, ncu_id=r.ncu_id + c * len(ncu.rows))
                                        for c in range(copies) for r in ncu.rows]
    ncu2 = NcuReport(path=ncu.path, rows=rows, metrics_returned=ncu.metrics_returned, source=ncu.source,
                     units=ncu.units)
    return kin2, nsy2, ncu2, ind, len(nsy.kernels)


def replicate_columns(capture: str, copies: int):
    """:func:`replicate` with the Kineto, nsys and ncu inputs as the readers hand them: their Arrow tables,
    copied and shifted the same way, beneath ``TableRecords``."""
    import numpy as np
    import pyarrow as pa

    from profiler_core.ingest import read_kineto, read_ncu_columns, read_nsys_columns
    from profiler_core.ingest.column_records import (
        counter_table,
        counter_table_records,
        cpu_op_records,
        nvtx_records,
        runtime_records,
        timeline_records,
    )
    from profiler_core.record_columns import TableRecords
    from profiler_core.records import KinetoTrace, NcuReport, NsysTimeline

    _, one, ncu, ind, base = replicate(capture, 1, kineto_only=True)
    root, kin_name, nsys_name, ncu_name, _ = CAPTURES[capture]
    cols, counters = read_nsys_columns(root / nsys_name), read_ncu_columns(root / ncu_name)
    two = replicate(capture, 2)[1]  # the period and correlation step: what replicate did to the second copy
    period = two.kernels[base].start_ns - one.kernels[0].start_ns
    corr = next(b.correlation_id - a.correlation_id for a, b in zip(one.kernels, two.kernels[base:], strict=False)
                if a.correlation_id is not None)
    per_config = len(ncu.rows) < base

    def tiled(table: pa.Table, shifted: dict[str, int]) -> pa.Table:
        rows = table.num_rows
        out = table.take(pa.array(np.tile(np.arange(rows), copies)))
        copy = np.repeat(np.arange(copies, dtype=np.int64), rows)
        for name, step in shifted.items():
            i = out.column_names.index(name)
            col = out.column(name).combine_chunks()
            valid = ~np.asarray(col.is_null())
            values = np.where(valid, col.fill_null(0).to_numpy() + copy * step, 0)
            out = out.set_column(i, name, pa.array(values, pa.int64(), mask=~valid))
        return out

    kin_one = read_kineto(root / kin_name)
    k_period, k_corr, k_ext = kineto_steps(kin_one)
    k_times = {"start_ns": k_period, "end_ns": k_period}
    kin = KinetoTrace(
        path=kin_one.path, metadata=kin_one.metadata,
        kernels=TableRecords(tiled(kin_one.kernels.table, {**k_times, "correlation_id": k_corr, "external_id": k_ext}),
                             timeline_records),
        cpu_ops=TableRecords(tiled(kin_one.cpu_ops.table, {**k_times, "external_id": k_ext}), cpu_op_records),
        runtime_calls=TableRecords(tiled(kin_one.runtime_calls.table,
                                         {**k_times, "correlation_id": k_corr, "external_id": k_ext}), runtime_records))
    times = {"start_ns": period, "end_ns": period}
    nsy_cols = NsysTimeline(
        path=one.path, gpus=one.gpus, warnings=list(cols.warnings),
        kernels=TableRecords(tiled(cols.kernels, {**times, "correlation_id": corr}), timeline_records),
        runtime_calls=TableRecords(tiled(cols.runtime_calls, {**times, "correlation_id": corr}), runtime_records),
        nvtx_ranges=TableRecords(tiled(cols.nvtx_ranges, times), nvtx_records))
    table = counter_table(counters.launches, counters.metrics)
    if not per_config:  # one copy per copy of the timeline, as replicate numbers them
        table = tiled(table, {"ncu_id": table.num_rows})
    ncu_cols = NcuReport(path=ncu.path, rows=TableRecords(table, counter_table_records),
                         metrics_returned=counters.metrics_returned, source=counters.source, units=counters.units)
    return kin, nsy_cols, ncu_cols, ind, base


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(capture: str, size: int, inputs: str) -> None:
    from profiler_core.attribution import attribute
    from profiler_core.profile_io import read_profile, write_profile

    base = len(replicate(capture, 1)[0].kernels)
    make = replicate_columns if inputs == "columns" else replicate
    kin, nsy, ncu, ind, _ = make(capture, max(1, round(size / base)))
    inputs_mb = _rss_mb()
    t0 = time.perf_counter()
    c0 = time.process_time()
    profile = attribute(kineto=kin, nsys=nsy, ncu=ncu, inductor=ind)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_profile(Path(tmp) / "profile.json", profile)
        written = sum(p.stat().st_size for p in Path(tmp).iterdir())
        t2 = time.perf_counter()
        cpu, peak = time.process_time() - c0, _rss_mb()
        kernels, operators, pct = len(profile.kernels), len(profile.operators), profile.coverage.attributed_time_pct
        del profile, kin, nsy, ncu, ind
        t3 = time.perf_counter()
        back = read_profile(Path(tmp) / "profile.json")  # with its reference and consistency checks
        read_s = time.perf_counter() - t3
        assert len(back.kernels) == kernels
    print(json.dumps({"kernels": kernels, "operators": operators, "attribute_s": t1 - t0, "write_s": t2 - t1,
                      "total_s": t2 - t0, "cpu_s": cpu, "inputs_rss_mb": inputs_mb, "peak_rss_mb": peak,
                      "written_mb": written / 1e6, "attributed_pct": pct, "read_s": read_s,
                      "peak_after_read_mb": _rss_mb()}), flush=True)
    sys.stdout.flush()


# The whole command in a fresh interpreter, timed by its own small parent (RUSAGE_CHILDREN is that child's).
_PROBE = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
          "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
          "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


# The same library calls `oprof attribute` makes (attribute the run, write profile.json), without the CLI.
_LIBRARY = ("import sys; from pathlib import Path; from profiler_core import api; "
            "from profiler_core.profile_io import write_profile; "
            "write_profile(Path(sys.argv[2]), api.attribute(Path(sys.argv[1])).single())")
_CLI = "import sys; from profiler_core.cli import main; main(['attribute', sys.argv[1], '--out', sys.argv[2]])"


def time_cli(run: Path, code: str = _CLI) -> tuple[float, float]:
    """(wall s, peak RSS MiB) of ``oprof attribute RUN --out <tmp>`` (``code``: _LIBRARY for its floor)."""
    with tempfile.TemporaryDirectory() as tmp:
        cli = [sys.executable, "-c", code, str(run), str(Path(tmp) / "profile.json")]
        out = subprocess.run([sys.executable, "-c", _PROBE, *cli], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def _child_figures(label: str, capture: str, *flags: str) -> dict | None:
    """The JSON figures a fresh process of this script prints (``--child`` or ``--floor-child``); None,
    with the failure printed under ``label``, when it fails."""
    out = subprocess.run([sys.executable, __file__, "--capture", capture, *flags], capture_output=True, text=True,
                         cwd=REPO, check=False)
    if out.returncode != 0:
        print(f"{label}: failed (exit {out.returncode})\n{out.stderr[-2000:]}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="572,100k,1M", help="comma-separated kernel counts (k, M suffixes)")
    ap.add_argument("--capture", choices=sorted(CAPTURES), default="joinable")
    ap.add_argument("--inputs", choices=("columns", "records"), default="columns",
                    help="nsys and ncu inputs as the readers hand them (Arrow columns beneath TableRecords), "
                         "or as lists of records")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--floor-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    from profiler_core.numpy_pages import small_pages

    if args.child:
        with small_pages():  # as `oprof attribute` runs it (profiler_core/numpy_pages.py)
            _child(args.capture, args.child, args.inputs)
        return
    if args.floor_child:
        from attribution_floor import run_floor  # beside this script

        with small_pages():  # the floor too, so the two are compared on the same pages
            figures = run_floor(args.capture, args.floor_child)
        figures["peak_rss_mb"] = _rss_mb()
        print(json.dumps(figures), flush=True)
        return
    print(f"capture {args.capture}, nsys and ncu inputs as {args.inputs}; each size in a fresh process, inputs "
          "parsed before the clock starts")
    print(f"{'kernels':>9} {'operators':>9} {'attribute s':>11} {'write s':>8} {'total s':>8} {'cpu s':>6} "
          f"{'inputs MB':>9} {'peak RSS MB':>11} {'written MB':>10} {'read s':>6}  before / floor")
    for size in (parse_size(s) for s in args.sizes.split(",")):
        r = _child_figures(str(size), args.capture, "--inputs", args.inputs, "--child", str(size))
        if r is None:
            continue
        print(f"{r['kernels']:>9} {r['operators']:>9} {r['attribute_s']:>11.2f} {r['write_s']:>8.2f} "
              f"{r['total_s']:>8.2f} {r['cpu_s']:>6.2f} {r['inputs_rss_mb']:>9.0f} {r['peak_rss_mb']:>11.0f} "
              f"{r['written_mb']:>10.1f} {r['read_s']:>6.2f}  {FLOORS.get(round(size, -5), '')}")
        if args.capture != "joinable":
            continue  # the floor joins one ncu row per launch
        f = _child_figures(f"{'floor':>9}", args.capture, "--floor-child", str(size))
        if f is None:
            continue
        print(f"{'floor':>9} {f['operators']:>9} {'':>11} {'':>8} {f['wall_s']:>8.2f} {f['cpu_s']:>6.2f} {'':>9} "
              f"{f['peak_rss_mb']:>11.0f} {f['written_mb']:>10.1f} {'':>6}  attribution_floor.py: engine / floor "
              f"{r['cpu_s'] / f['cpu_s']:.2f}x CPU, {r['peak_rss_mb'] / f['peak_rss_mb']:.2f}x peak RSS")
    # the whole command against the same library calls, alternating, best of five each
    cli_runs, lib_runs = [], []
    for _ in range(5):
        cli_runs.append(time_cli(GPT2_RUN))
        lib_runs.append(time_cli(GPT2_RUN, _LIBRARY))
    (wall, rss), (lib_wall, lib_rss) = min(cli_runs), min(lib_runs)
    print(f"oprof attribute {GPT2_RUN.relative_to(REPO)} (whole command, fresh process, best of 5): {wall:.2f} s "
          f"wall, {rss:.0f} MiB peak; the same library calls without the CLI: {lib_wall:.2f} s, {lib_rss:.0f} MiB "
          f"({wall / lib_wall:.2f}x; target 1.2x)")


if __name__ == "__main__":
    main()
