"""Copy an ``oprof optimize`` run directory into the compact form shipped under examples/captures/.

    python scripts/ship_capture.py oprof-runs/<name>-optimize-<stamp> examples/captures/h200/<name> \
        --workload examples/<name>.py

What is kept, per capture (``baseline/``, and the kept trial's capture as ``optimized/`` with
its plan.json): manifest.json, counters.csv (the ncu CSV export), kineto.json gzipped,
inductor/ (output_code.log, gzipped when over 1 MB, and torch_trace.tgz), graph_capture.json.gz
(a step graph's recording, traced), and modules.json (the module map of code that ran eagerly).
What is dropped: counters.ncu-rep (proprietary, large, and
the CSV carries the same counters), profile.json (tests and the demo attribute the captures
again), report.html, and timeline.sqlite unless ``--keep-timeline`` keeps the baseline's. At the top:
optimize.json with its paths made relative to the shipped directory, walltime.json and
findings.json. The target directory is written whole, then renamed into place.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

BIG_LOG_BYTES = 1 << 20
TOP_FILES = ("walltime.json", "findings.json")


def _gzip(src: Path, dst: Path) -> None:
    with src.open("rb") as fin, gzip.open(dst, "wb", compresslevel=9) as fout:
        shutil.copyfileobj(fin, fout)


def ship_capture_dir(src: Path, dst: Path, extra: tuple[str, ...] = ()) -> None:
    """One capture directory in its compact form."""
    if not (src / "manifest.json").is_file():
        raise SystemExit(f"{src}: no manifest.json; not a capture directory")
    dst.mkdir(parents=True)
    for name in ("manifest.json", "counters.csv", "graph_capture.json.gz", *extra):
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    if (src / "kineto.json").is_file():
        _gzip(src / "kineto.json", dst / "kineto.json.gz")
    elif (src / "kineto.json.gz").is_file():
        shutil.copy2(src / "kineto.json.gz", dst / "kineto.json.gz")
    inductor = src / "inductor"
    if inductor.is_dir():
        (dst / "inductor").mkdir()
        for item in inductor.iterdir():
            if item.name == "output_code.log" and item.stat().st_size > BIG_LOG_BYTES:
                _gzip(item, dst / "inductor" / "output_code.log.gz")
            elif item.is_file():
                shutil.copy2(item, dst / "inductor" / item.name)


def scrub_sqlite(path: Path, checkout: str) -> int:
    """Remove the checkout path the capture ran from out of every text value of an nsys SQLite export
    (the command line, the environment, the capture's own settings); returns the values changed.

    ``<checkout>/examples/x.py`` becomes ``examples/x.py``, the checkout itself ``.``. The file is
    rewritten (VACUUM), so no old page keeps the path.
    """
    con = sqlite3.connect(path)
    changed = 0
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]:
                cur = con.execute(
                    f'UPDATE "{table}" SET "{column}" = replace(replace("{column}", ?, \'\'), ?, \'.\') '
                    f'WHERE typeof("{column}") = \'text\' AND instr("{column}", ?) > 0',
                    (checkout.rstrip("/") + "/", checkout.rstrip("/"), checkout.rstrip("/")))
                changed += cur.rowcount
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return changed


def _relative(value: str | None, root: Path) -> str | None:
    if not value:
        return value
    try:
        return str(Path(value).resolve().relative_to(root.resolve())) or "."
    except ValueError:
        return value


def _located(value: str | None, recorded_run_dir: str, run_dir: Path) -> str | None:
    """A path the loop recorded, found again under ``run_dir``: the loop writes paths as it was given
    them (relative to the directory it ran in, or absolute on the machine it ran on), and neither need
    hold here."""
    if not value or Path(value).exists():
        return value
    try:
        return str(run_dir / Path(value).relative_to(recorded_run_dir))
    except ValueError:
        return value


KEPT = ("modules.json",)


def ship(run_dir: Path, target: Path, workload: str, keep_timeline: bool = False,
         trials: tuple[tuple[str, str], ...] = ()) -> None:
    """``run_dir`` (an optimize run) into ``target`` in the shipped form; each ``(name, trial_dir)``
    of ``trials`` ships that trial's capture and plan as ``target/name`` beside ``optimized/``."""
    result = json.loads((run_dir / "optimize.json").read_text())
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        out = tmp / target.name
        out.mkdir()
        ship_capture_dir(run_dir / "baseline", out / "baseline",
                         KEPT + (("timeline.sqlite",) if keep_timeline else ()))
        recorded = str(result.get("run_dir") or "")
        final = _located(result.get("final_run_dir"), recorded, run_dir)
        if final and Path(final).resolve() != (run_dir / "baseline").resolve():
            ship_capture_dir(Path(final) / "capture", out / "optimized", KEPT)
            shutil.copy2(Path(final) / "plan.json", out / "optimized" / "plan.json")
        for name, trial_dir in trials:
            ship_capture_dir(run_dir / trial_dir / "capture", out / name, KEPT)
            shutil.copy2(run_dir / trial_dir / "plan.json", out / name / "plan.json")
        result["workload"] = workload
        result["run_dir"] = "."
        result["final_run_dir"] = _relative(final, run_dir)
        for trial in result.get("trials", []):
            trial["run_dir"] = _relative(_located(trial.get("run_dir"), recorded, run_dir), run_dir)
        (out / "optimize.json").write_text(json.dumps(result, indent=1) + "\n")
        for name in TOP_FILES:
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, out / name)
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="an 'oprof optimize' run directory")
    parser.add_argument("target", type=Path, help="e.g. examples/captures/h200/<name>")
    parser.add_argument("--workload", required=True, help="the workload path as the project names it")
    parser.add_argument("--keep-timeline", action="store_true", help="keep the baseline's timeline.sqlite (nsys)")
    parser.add_argument("--trial", action="append", default=[], metavar="NAME=TRIAL_DIR",
                        help="also ship a trial's capture, e.g. bf16_trial=trial-1-bf16_autocast")
    args = parser.parse_args(argv)
    trials: list[tuple[str, str]] = []
    for spec in args.trial:
        name, _, trial_dir = spec.partition("=")
        if not name or not (args.run_dir / trial_dir / "capture").is_dir():
            print(f"--trial {spec}: give NAME=TRIAL_DIR, a trial directory of the run holding capture/",
                  file=sys.stderr)
            return 2
        trials.append((name, trial_dir))
    if not (args.run_dir / "optimize.json").is_file():
        print(f"{args.run_dir}: no optimize.json; pass an 'oprof optimize' run directory", file=sys.stderr)
        return 2
    args.target.parent.mkdir(parents=True, exist_ok=True)
    ship(args.run_dir, args.target, args.workload, args.keep_timeline, tuple(trials))
    print(args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
