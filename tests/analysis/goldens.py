"""What the analysis layer prints for every shipped H200 capture, frozen: the goldens a rewrite of
summary, diagnose, compare and the markdown report (columnar or not) must reproduce.

    python -m tests.analysis.goldens            # rewrite tests/data/analysis_goldens/ after a meant change

One gzipped JSON per capture (``<workload>__<capture>.json.gz``): diagnose's findings, the compact
summary and the markdown report; one per workload with a baseline and an optimized capture, their
comparison. Kept out of the repository's figures: these only say "unchanged", never "right".
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "examples" / "captures" / "h200"
GOLDENS = ROOT / "tests" / "data" / "analysis_goldens"
RUNS = sorted(p.parent for p in CAPTURES.glob("*/*/manifest.json"))


def run_id(run: Path) -> str:
    return f"{run.parent.name}__{run.name}"


def analysed(profile: Any) -> dict[str, Any]:
    """The analysis outputs of one profile, as JSON values."""
    from profiler_core.analysis import diagnose
    from profiler_core.report import compact_summary, render_markdown

    findings = diagnose(profile)
    return {"findings": findings.model_dump(mode="json"),
            "summary": compact_summary(profile, findings=findings),
            "markdown": render_markdown(profile, findings=findings).splitlines()}


TOP_OPERATORS = 40  # a comparison's operator rows kept: the largest changes (all of them run to megabytes)


def compared(baseline: Any, optimized: Any) -> dict[str, Any]:
    from profiler_core.analysis import compare

    comparison = compare(baseline, optimized).model_dump(mode="json")
    rows = comparison.pop("operators")
    comparison["operator_rows"] = len(rows)
    comparison["top_operators"] = rows[:TOP_OPERATORS]
    return {"comparison": comparison}


def pairs() -> list[tuple[Path, Path]]:
    return [(CAPTURES / w / "baseline", CAPTURES / w / "optimized") for w in sorted({r.parent.name for r in RUNS})
            if (CAPTURES / w / "baseline" / "manifest.json").is_file()
            and (CAPTURES / w / "optimized" / "manifest.json").is_file()]


def read_golden(name: str) -> Any:
    with gzip.open(GOLDENS / f"{name}.json.gz", "rt") as f:
        return json.load(f)


def normalised(value: Any) -> Any:
    """JSON round trip: tuples become lists and floats keep their repr, as the stored file has them."""
    return json.loads(json.dumps(value))


def _write(name: str, value: Any) -> None:
    path = GOLDENS / f"{name}.json.gz"
    tmp = path.with_suffix(".tmp")
    with gzip.GzipFile(tmp, "wb", compresslevel=9, mtime=0) as f:
        f.write(json.dumps(value, indent=0, sort_keys=True).encode())
    tmp.replace(path)


def main() -> int:
    from profiler_core.attribution import attribute_run

    GOLDENS.mkdir(parents=True, exist_ok=True)
    profiles = {run: attribute_run(run) for run in RUNS}
    for run, profile in profiles.items():
        _write(run_id(run), analysed(profile))
    for base, opt in pairs():
        _write(f"{base.parent.name}__compare", compared(profiles[base], profiles[opt]))
    print(f"wrote {len(profiles)} capture goldens and {len(pairs())} comparisons to {GOLDENS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
