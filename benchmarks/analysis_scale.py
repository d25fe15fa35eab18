"""How long diagnose, compare and the reports take on large profiles (target: a few seconds each).

Repeats the real H200 baseline/optimized pair (tests/data/h200_pair) N times as N layers of
one model, with fresh kernel ids, operator keys and timestamps, then times each stage.
Usage: ``python benchmarks/analysis_scale.py [LAYERS]`` (default 200: ~8800 baseline kernels).
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler_core.analysis import compare, diagnose  # noqa: E402
from profiler_core.report import compact_summary, export_perfetto, render_html, render_markdown  # noqa: E402
from profiler_core.schema import Profile  # noqa: E402
from tests.analysis.real_profiles import pair_profile  # noqa: E402


def replicate(profile: Profile, layers: int) -> Profile:
    """``profile`` repeated ``layers`` times back to back, ids and call indices renumbered."""
    # one layer's length, not its end: the H200 timestamps are epoch nanoseconds, and multiples of
    # them overflow int64 from the fifth layer on
    span = max(k.end_ns for k in profile.kernels) - min(k.start_ns for k in profile.kernels) + 10_000
    kernels, operators, calls = [], [], defaultdict(int)
    for layer in range(layers):
        id_map = {}
        for k in profile.kernels:
            new = k.model_copy(deep=True, update={"id": len(kernels), "start_ns": k.start_ns + layer * span,
                                                  "end_ns": k.end_ns + layer * span})
            id_map[k.id] = new.id
            kernels.append(new)
        for op in profile.operators:
            key = f"{op.name}#{calls[op.name]}"
            calls[op.name] += 1
            ids = [id_map[i] for i in op.kernel_ids]
            for i in ids:
                kernels[i].attribution.operator_key = key
            operators.append(op.model_copy(deep=True, update={"key": key, "call_index": calls[op.name] - 1,
                                                              "kernel_ids": ids}))
    return profile.model_copy(update={"kernels": kernels, "operators": operators})


def timed(label: str, fn):  # noqa: ANN001, ANN201
    """Run ``fn``; print wall and CPU seconds (CPU is steadier on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    print(f"{label:<28} {time.perf_counter() - wall:8.3f} s wall {time.process_time() - cpu:8.3f} s cpu")
    return out


def main(layers: int) -> None:
    base = replicate(pair_profile("base"), layers)
    opt = replicate(pair_profile("opt"), layers)
    print(f"{layers} layers: baseline {len(base.kernels)} kernels / {len(base.operators)} operators, "
          f"optimized {len(opt.kernels)} / {len(opt.operators)}")
    findings = timed("diagnose(baseline)", lambda: diagnose(base))
    comparison = timed("compare(baseline, opt)", lambda: compare(base, opt, base_findings=findings))
    html = timed("render_html", lambda: render_html(opt, findings=findings, comparison=comparison))
    timed("render_markdown", lambda: render_markdown(opt, findings=findings, comparison=comparison))
    trace = timed("export_perfetto + dumps", lambda: json.dumps(export_perfetto(base)))
    summary = timed("compact_summary", lambda: compact_summary(base, findings=findings))
    print(f"html {len(html) / 1e3:.0f} kB, trace {len(trace) / 1e6:.1f} MB, "
          f"summary {len(json.dumps(summary, separators=(',', ':')))} B, speedup {comparison.speedup:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
