"""The report's bar charts from matplotlib's SVG backend: well-formed, titled, labelled, no links out."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

from profiler_core.report.svg_charts import dumbbell_chart, grouped_bars, hbar_chart, stacked_bar
from tests.conftest import REPO

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> tuple[str, str]:
    tree = ET.fromstring(svg)
    first = tree[0]
    assert first.tag == f"{NS}title"
    return first.text or "", " ".join(t.text or "" for t in tree.iter(f"{NS}text"))


def test_hbar_labels_every_row_with_its_value() -> None:
    svg = hbar_chart([("gemm", 132.4), ("elementwise", 16.6)], unit="us", title="Time by class <&>")
    title, text = _texts(svg)
    assert title == "Time by class <&>"  # escaped in the SVG, read back whole
    assert "gemm" in text and "elementwise" in text and "132.4 us" in text and "16.6 us" in text
    assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_grouped_stacked_and_dumbbell_charts() -> None:
    _, grouped = _texts(grouped_bars([("gemm", 132.4, 27.9)], labels=("baseline", "optimized"), unit="us",
                                     title="Before and after"))
    assert "baseline" in grouped and "optimized" in grouped and "27.9" in grouped
    _, stacked = _texts(stacked_bar([("cupti_correlation", 95.0), ("unattributed", 5.0)], title="Coverage"))
    assert "cupti_correlation 95.0%" in stacked and "unattributed 5.0%" in stacked
    _, shifts = _texts(dumbbell_chart([("gemm TC %", 0.01, 61.0), ("gemm SM %", None, 40.0)], title="Shifts"))
    assert "0.01 \u2192 61.0" in shifts and "n/a \u2192 40.0" in shifts and "None" not in shifts


def test_importing_the_charts_does_not_import_matplotlib() -> None:
    code = ("import sys, profiler_core.report.svg_charts, profiler_core.report.roofline_chart, "
            "profiler_core.report.html; print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "False"
