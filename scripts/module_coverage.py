"""Share of kernel time that carries a module path, per capture: the figure docs/attribution.md
holds every capture with modules to (>= 95%).

    python scripts/module_coverage.py examples/captures/h200/*/baseline

Each argument is a capture directory (its manifest.json beside the traces); the capture is
attributed afresh. Per capture it prints the kernel count, the share of kernel time with a path,
and the share at the model itself (path ``""``: placed, but no finer than the model).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler_core.attribution.sources import attribute_run  # noqa: E402
from profiler_core.errors import ProfilerError  # noqa: E402


def coverage(run: Path) -> tuple[int, float, float]:
    """(kernels, % of kernel time with a module path, % at the model itself)."""
    profile = attribute_run(run, allow_partial=True)
    total = placed = root = 0
    for k in profile.kernels:
        total += k.duration_ns
        if k.module_path is not None:
            placed += k.duration_ns
            root += k.duration_ns if k.module_path == "" else 0
    scale = 100.0 / total if total else 0.0
    return len(profile.kernels), placed * scale, root * scale


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    worst = 0
    for arg in argv:
        try:
            n, placed, root = coverage(Path(arg))
        except ProfilerError as err:
            print(f"{arg}: {err}", file=sys.stderr)
            worst = 1
            continue
        print(f"{arg}: {n} kernels, {placed:.1f}% of kernel time with a module path, {root:.1f}% at the model itself")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
