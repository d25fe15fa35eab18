"""The analysis commands against a columns floor, on a large (columnar) profile.

    python benchmarks/analysis_floor.py PROFILE [--commands summary diagnose compare] [--other OPT]

PROFILE is a profile.json whose kernels and operators are Parquet tables beside it (any profile
over the columnar threshold; ``benchmarks/bench_attribute.py``'s replicator makes them at any
size). Each command runs as ``oprof <command> PROFILE`` in a fresh interpreter, and so does its
floor: the same reading and the arithmetic the output rests on, on columns with pyarrow and
numpy, and nothing else:

* summary: the kernel table's durations and operator keys and the operator table's keys, names,
  classes and durations; time per class (``bincount``) and the ten slowest operators
  (``argpartition``);
* diagnose: the summary's floor, plus every counter column of both tables, the per-class
  duration-weighted mean of each counter, and one threshold mask per counter over the operators
  (what a rule reads and evaluates when it is an array predicate);
* compare (``oprof compare PROFILE OPT``; OPT is ``--other``, a copy of PROFILE by default): the
  diagnose floor of PROFILE (compare diagnoses its baseline), the same columns of OPT, the
  operators of both joined by key, and every counter's delta and direction mask per operator.

For each it prints CPU seconds (user + system) and peak RSS of the child, and the ratio to the
floor (#32's targets: at most 3x the floor and 2 GB). A figure from a busy machine is a figure
from a busy machine: run it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# the child: run argv, then write its own CPU seconds and peak RSS to the file named in the environment
RUNNER = """
import json, os, resource, sys
sys.argv = sys.argv[1:]
code = 0
try:
    if sys.argv[0] == "floor":
        sys.path.insert(0, os.environ["FLOOR_DIR"])
        from analysis_floor import floor
        from profiler_core.numpy_pages import small_pages
        with small_pages():  # the pages oprof's analysis commands run on, so the two compare alike
            floor(*sys.argv[1:])
    else:
        from profiler_core.cli import main
        sys.argv = ["oprof", *sys.argv]
        main()
except SystemExit as done:
    code = done.code or 0
use = resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["FLOOR_OUT"], "w") as f:
    json.dump({"cpu_s": use.ru_utime + use.ru_stime, "rss_mb": use.ru_maxrss / 1024, "rc": code}, f)
"""


def _tables(profile: Path) -> tuple[Path, Path]:
    meta = json.loads(profile.read_text())
    if not meta.get("kernel_table") or not meta.get("operator_table"):
        raise SystemExit(f"{profile}: not a columnar profile (no kernel and operator tables); "
                         "make one with benchmarks/bench_attribute.py's replicator")
    return profile.parent / meta["kernel_table"]["path"], profile.parent / meta["operator_table"]["path"]


def floor(command: str, path: str, other: str | None = None) -> None:
    """What ``oprof <command>`` must at least do, on columns (printed, so nothing is optimised away)."""
    if command == "compare":
        _compare_floor(path, other or path)
        return
    print("\n".join(_floor_lines(command, path)[0]))


def _compare_floor(path: str, other: str) -> None:
    import numpy as np
    import pyarrow.compute as pc

    out, base_ops = _floor_lines("diagnose", path)
    opt_out, opt_ops = _floor_lines("diagnose", other)
    at = pc.index_in(opt_ops["key"], value_set=base_ops["key"])
    joined = _numbers(at, -1) >= 0
    rows = _numbers(at, -1)[joined].astype(np.int64)
    for name in (n for n in base_ops.column_names if n.startswith("metrics.")):
        b = _numbers(base_ops[name], np.nan).astype(float)[rows]
        o = _numbers(opt_ops[name], np.nan).astype(float)[joined]
        delta = o - b
        same = np.abs(delta) <= np.maximum(0.5, np.abs(b) * 0.02)
        out.append(f"{name}: {np.nansum(delta):.3g}, {int(same.sum())} same, {int((delta > 0).sum())} up")
    print("\n".join(out + opt_out))


def _floor_lines(command: str, path: str) -> tuple[list[str], Any]:
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    kernel_file, operator_file = _tables(Path(path))
    ops_columns = ["key", "name", "op_class", "duration_ns"]
    kernel_columns = ["duration_ns", "operator_key"]
    if command == "diagnose":
        counters = [n for n in pq.read_schema(kernel_file).names if n.startswith("counters.")]
        metrics = [n for n in pq.read_schema(operator_file).names if n.startswith("metrics.")]
        kernel_columns += counters
        ops_columns += metrics
    # (ParquetFile, as oprof reads them: read_table goes through pyarrow.dataset, which imports pandas)
    kernels = pq.ParquetFile(kernel_file).read(columns=kernel_columns)
    ops = pq.ParquetFile(operator_file).read(columns=ops_columns)
    duration = _numbers(ops["duration_ns"], 0)
    classes = pc.dictionary_encode(ops["op_class"]).combine_chunks()
    class_codes = _numbers(classes.indices, 0)
    per_class = np.bincount(class_codes, weights=duration)
    key_codes = _numbers(pc.dictionary_encode(kernels["operator_key"]).combine_chunks().indices, 0)
    per_key = np.bincount(key_codes, weights=_numbers(kernels["duration_ns"], 0))
    top = np.argpartition(-duration, min(10, len(duration) - 1))[:10]
    top = top[np.argsort(-duration[top])]
    out = [f"{c}: {t:.0f}" for c, t in zip(classes.dictionary.to_pylist(), per_class, strict=False)]
    out += [f"{ops['name'][int(i)]} {duration[i]:.0f}" for i in top]
    out.append(f"{len(per_key)} operators with kernels")
    if command == "diagnose":
        for name in metrics:
            values = _numbers(ops[name], np.nan).astype(float)
            valid = ~np.isnan(values)
            weighted = np.bincount(class_codes[valid], weights=values[valid] * duration[valid],
                                   minlength=len(per_class))
            mask = valid & (values > np.nanmedian(values) if valid.any() else valid)
            out.append(f"{name}: {weighted.sum():.3g}, {int(mask.sum())} over the median")
        for name in counters:
            out.append(f"{name}: {np.nansum(_numbers(kernels[name], np.nan).astype(float)):.3g}")
    return out, ops


def _numbers(column: Any, fill: float) -> Any:
    """A numeric Arrow column as numpy, ``fill`` where null, from its buffers: pyarrow's own
    ``to_numpy`` imports pandas on first use (0.2-0.5 s), which ``oprof`` never loads."""
    from profiler_core.ingest.arrow_columns import filled

    return filled(column, fill)


def _child(argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "use.json"
        env = {**os.environ, "FLOOR_OUT": str(result), "FLOOR_DIR": str(Path(__file__).resolve().parent),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        subprocess.run([sys.executable, "-c", RUNNER, *argv], env=env, stdout=subprocess.DEVNULL, check=False)
        if not result.is_file():
            raise SystemExit(f"{' '.join(argv)}: the child wrote no figures (it crashed)")
        return json.loads(result.read_text())


def _copy_of(profile: Path) -> Path:
    """A copy of a columnar profile (its JSON and both tables) in a new folder beside it."""
    import shutil

    target = Path(tempfile.mkdtemp(prefix="compare-opt-", dir=profile.parent.parent))
    for name in (profile, *_tables(profile)):
        shutil.copy2(name, target / name.name)
    return target / profile.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--commands", nargs="+", default=["summary", "diagnose"],
                        choices=["summary", "diagnose", "compare"])
    parser.add_argument("--other", type=Path, default=None,
                        help="compare's optimized profile (default: a copy of PROFILE, made beside it)")
    args = parser.parse_args(argv)
    _tables(args.profile)
    other, made = args.other, None
    if "compare" in args.commands and other is None:
        other = _copy_of(args.profile)
        made = other.parent
    try:
        return _run(args.commands, args.profile, other)
    finally:
        if made is not None:
            import shutil

            shutil.rmtree(made, ignore_errors=True)


def _run(commands: list[str], profile: Path, other: Path | None) -> int:
    print(f"{'command':<10} {'oprof CPU s':>11} {'RSS MB':>8} {'floor CPU s':>11} {'RSS MB':>8} {'ratio':>6}")
    for command in commands:
        extra = [str(other)] if command == "compare" else []
        ours = _child([command, str(profile), *extra])
        base = _child(["floor", command, str(profile), *extra])
        if ours["rc"] not in (0, None) or base["rc"] not in (0, None):
            print(f"{command}: exit {ours['rc']} (oprof), {base['rc']} (floor)", file=sys.stderr)
            return 1
        print(f"{command:<10} {ours['cpu_s']:>11.2f} {ours['rss_mb']:>8.0f} {base['cpu_s']:>11.2f} "
              f"{base['rss_mb']:>8.0f} {ours['cpu_s'] / base['cpu_s']:>5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
