"""The roofline chart, module tree and their markdown / summary forms, on the shipped H200 GPT-2 capture."""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET

import pytest

from profiler_core.analysis.roofline import roofline
from profiler_core.attribution import attribute_run
from profiler_core.report import render_html, render_markdown
from profiler_core.report.roofline_chart import roofline_svg
from profiler_core.report.roofline_report import modules_html
from profiler_core.report.summary import SUMMARY_MAX_BYTES, compact_summary
from profiler_core.schema import Profile
from tests.conftest import REPO

GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.fixture(scope="module")
def gpt2() -> Profile:
    return attribute_run(GPT2)


def test_roofline_svg_places_every_operator_with_flops_and_bytes(gpt2: Profile) -> None:
    roof = roofline(gpt2, measured_roofs=True)
    svg = roofline_svg(roof)
    tree = ET.fromstring(svg)  # well-formed XML, the <svg> element alone
    ns = "{http://www.w3.org/2000/svg}"
    groups = {g.get("id"): g for g in tree.iter(f"{ns}g") if g.get("id")}
    placed = roof.plot_points()
    assert len(placed) == sum(1 for r in roof.operators if r.flops and r.dram_bytes)
    markers = sum(len(g.findall(f".//{ns}path")) for gid, g in groups.items() if gid.startswith("points-"))
    assert markers == len(placed)  # one marker per placed operator
    # every roof the chip has is drawn: the memory roof and each compute roof, published and measured
    assert {"roof-dram-published", "roof-dram-measured", "roof-bf16_tensor-measured"} <= set(groups)
    published = "-".join(sorted(gid for gid in groups if gid.endswith("-published"))).replace("roof-", "")
    assert all(name in published for name in roof.chip.flops), published  # type: ignore[union-attr]
    text = " ".join(t.text or "" for t in tree.iter(f"{ns}text"))
    assert "DRAM 4.8 TB/s (published)" in text and "bf16_tensor 790 TFLOP/s (measured)" in text
    assert f"{len(placed)} of {len(roof.operators)} operators placed" in text  # the point count, explained
    assert "None" not in text and "gemm: " in text


def test_a_long_captures_roofline_merges_operators_a_pixel_apart(gpt2: Profile) -> None:
    # the GPT-2 operators, each called again and again with its time stretched by up to 3%: more
    # operators than MAX_MARKERS, so those of a class within one cell of the chart are one marker
    import math

    from profiler_core.report.roofline_chart import BINS_PER_DECADE, MAX_MARKERS, marker_places

    roof = roofline(gpt2, measured_roofs=True)
    placed = [r for r in roof.operators if r.flops and r.dram_bytes and r.duration_ns > 0]
    calls = [dataclasses.replace(r, duration_ns=round(r.duration_ns * (1 + j / 1000)),
                                 achieved_flops_per_s=r.achieved_flops_per_s / (1 + j / 1000))  # type: ignore[operator]
             for j in range(30) for r in placed]
    assert len(calls) > MAX_MARKERS
    long = dataclasses.replace(roof, operators=calls)
    svg = roofline_svg(long)
    tree = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    groups = {g.get("id"): g for g in tree.iter(f"{ns}g") if g.get("id", "").startswith("points-")}
    cells = {(r.op_class, math.floor(math.log10(r.arithmetic_intensity) * BINS_PER_DECADE),  # type: ignore[arg-type]
              math.floor(math.log10(r.achieved_flops_per_s) * BINS_PER_DECADE)) for r in calls}  # type: ignore[arg-type]
    markers = sum(len(g.findall(f".//{ns}path")) for g in groups.values())
    assert markers == len(cells) < len(placed) < len(calls)
    text = " ".join(t.text or "" for t in tree.iter(f"{ns}text"))
    assert f"{len(calls)} of {len(calls)} operators placed" in text and f"Drawn as {markers:,} markers" in text
    # each marker: its operators' summed time, placed inside their cell
    rows = [r for r in calls if r.op_class == "gemm"]
    figures = ([r.arithmetic_intensity for r in rows], [r.achieved_flops_per_s for r in rows],
               [r.duration_ns for r in rows])
    xs, ys, times = marker_places(*figures, 1e-3, 1e3, merge=True)
    assert sum(times) == sum(r.duration_ns for r in rows) and len(xs) == len({c for c in cells if c[0] == "gemm"})
    for r in rows:
        cell = (math.floor(math.log10(r.arithmetic_intensity) * BINS_PER_DECADE),  # type: ignore[arg-type]
                math.floor(math.log10(r.achieved_flops_per_s) * BINS_PER_DECADE))  # type: ignore[arg-type]
        assert any(cell == (math.floor(math.log10(x) * BINS_PER_DECADE), math.floor(math.log10(y) * BINS_PER_DECADE))
                   for x, y in zip(xs, ys, strict=True))
    assert marker_places(*figures, 1e-3, 1e3, merge=False)[2] == [float(r.duration_ns) for r in rows]


def test_roofline_svg_is_empty_without_points(gpt2: Profile) -> None:
    roof = roofline(gpt2, measured_roofs=True)
    assert roofline_svg(dataclasses.replace(roof, operators=[])) == ""


def test_html_and_markdown_carry_both_charts_and_the_tree(gpt2: Profile) -> None:
    html = render_html(gpt2)
    assert "<h2>Roofline</h2>" in html and "<h2>Modules</h2>" in html and "Repeated blocks of h" in html
    tree = modules_html(gpt2)
    assert tree.index(">h.0<") < tree.index(">h.1<") < tree.index(">h.11<")  # layers in order
    md = render_markdown(gpt2)
    assert "### Roofline" in md and "### Modules" in md
    assert re.search(r"\| aten::mm#(72|145) \| wte \| compute \(fp32\) \| \d+% \|", md)



def test_markdown_module_rows_indent_in_plain_text(gpt2: Profile) -> None:
    md = render_markdown(gpt2)
    assert not re.search(r"&[a-z]+;|&#\d+;", md)  # no HTML escapes anywhere in the Markdown
    rows = md.split("### Modules", 1)[1].split("\n\n", 2)[1].splitlines()[2:]
    assert rows[0].startswith("| (model) |")
    assert any(r.startswith("| └─ h |") for r in rows) and any(r.startswith("| · └─ h.0 |") for r in rows)


def test_compact_summary_names_the_headroom_and_the_layers(gpt2: Profile) -> None:
    s = compact_summary(gpt2)
    assert len(json.dumps(s, separators=(",", ":"))) <= SUMMARY_MAX_BYTES
    roof = s["roofline"]
    assert roof["chip"] == "h200_sxm" and roof["top_headroom"][0]["module"] == "wte"
    assert roof["blocks"]["parent"] == "h" and len(roof["blocks"]["us"]) == 12 and roof["blocks"]["outliers"] == []


def test_one_report_works_out_the_roofline_once(gpt2: Profile, monkeypatch: pytest.MonkeyPatch) -> None:
    # the roofline section, the module tree and their markdown read the one view's roofline
    import profiler_core.analysis.roofline as roofline_module

    calls = []
    real = roofline_module.roofline

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("measured_roofs"))
        return real(*args, **kwargs)

    monkeypatch.setattr(roofline_module, "roofline", counted)
    html = render_html(gpt2)
    assert calls == [True] and "<h2>Roofline</h2>" in html and "<h2>Modules</h2>" in html
    calls.clear()
    md = render_markdown(gpt2)
    assert calls == [True] and "### Modules" in md
