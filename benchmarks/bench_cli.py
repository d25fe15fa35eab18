"""How long ``oprof`` takes to answer, and how much memory it holds, against a bare interpreter.

Runs each command in a fresh subprocess (the way a shell runs it) several times and prints the
best wall time and the peak resident set size of the child. Target: ``--help`` and ``--version``
within a few tenths of a second of ``python -c pass``; ``diagnose --json`` on a shipped capture
without torch. Usage: ``python benchmarks/bench_cli.py [REPEATS]`` (default 5).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"
CLI = "import sys; from profiler_core.cli import main; main(sys.argv[1:])"

CASES: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("oprof --help", ["-c", CLI, "--help"]),
    ("oprof --version", ["-c", CLI, "--version"]),
    ("oprof diagnose <gpt2 baseline> --json", ["-c", CLI, "diagnose", str(CAPTURE), "--json"]),
]


# Each run is timed by its own small parent, so RUSAGE_CHILDREN holds that one child's peak RSS alone.
_PROBE = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
          "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
          "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def measure(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one run of the interpreter with ``args``."""
    out = subprocess.run([sys.executable, "-c", _PROBE, sys.executable, *args], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'command':40s} {'best wall s':>12s} {'median s':>9s} {'peak RSS MiB':>13s}")
    for label, args in CASES:
        runs = sorted(measure(args) for _ in range(repeats))
        walls = sorted(w for w, _ in runs)
        print(f"{label:40s} {walls[0]:12.3f} {walls[len(walls) // 2]:9.3f} {max(r for _, r in runs):13.1f}")


if __name__ == "__main__":
    main()
