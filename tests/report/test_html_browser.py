"""Render the HTML report in headless Chromium: it parses, lays out its charts, and paints a page."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from profiler_core.analysis import compare, diagnose
from profiler_core.report import render_html
from tests.analysis.real_profiles import pair_profile

CHROMIUM = next(
    (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium"),
]
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]


def _png_size_and_colors(data: bytes) -> tuple[int, int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base, opt = pair_profile("base"), pair_profile("opt")
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render_html(opt, findings=diagnose(opt), comparison=compare(base, opt)))
    return path


def test_dom_has_the_charts(page: Path) -> None:
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count("<svg") == 6 and "FASTER" in dom  # five profile/comparison charts and the roofline
    assert "<script" not in dom and "Roofline on H200 SXM" in dom


def test_gpt2_page_lays_out_the_roofline_and_the_module_tree(tmp_path: Path) -> None:
    from profiler_core.attribution import attribute_run
    from tests.conftest import REPO

    page = tmp_path / "gpt2.html"
    page.write_text(render_html(attribute_run(REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline")))
    dom = subprocess.run([CHROMIUM, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "Roofline on H200 SXM" in dom and 'id="points-gemm"' in dom  # the GEMMs placed as points
    assert "DRAM 4.8 TB/s (published)" in dom and "bf16_tensor 790 TFLOP/s (measured)" in dom
    assert "<h2>Modules</h2>" in dom and "h.0.attn" in dom and "Repeated blocks of h" in dom


def test_screenshot_paints_the_report(page: Path) -> None:
    shot = page.with_suffix(".png")
    subprocess.run(
        [CHROMIUM, *FLAGS, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    width, height, distinct_bytes = _png_size_and_colors(shot.read_bytes())
    assert (width, height) == (1200, 2400)
    assert distinct_bytes > 64, "the screenshot is (nearly) blank"
