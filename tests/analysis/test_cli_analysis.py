"""oprof diagnose / compare / report through the CLI: outputs, the CI gate's exit codes, user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.profile_io import write_profile
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile

runner = CliRunner()
app = load_commands()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("pair")
    return write_profile(d / "base.json", pair_profile("base")), write_profile(
        d / "opt.json", pair_profile("opt")
    )


def _one_line_error(result: object, needle: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert needle in err, err


def test_diagnose_json_and_out(pair: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "findings.json"
    result = runner.invoke(app, ["diagnose", str(pair[0]), "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [f["rule_id"] for f in doc["findings"]][:3] == ["host_bound", "launch_bound", "tensor_core_idle"]
    assert json.loads(out.read_text()) == doc
    assert not list(out.parent.glob(".*.tmp"))


def test_diagnose_terminal_and_threshold(pair: tuple[Path, Path]) -> None:
    result = runner.invoke(app, ["diagnose", str(pair[0]), "--threshold", "tensor_core_idle_pct=0.001"])
    assert result.exit_code == 0, result.output
    assert "manual_attention" in result.stdout and "tensor_core_idle" not in result.stdout
    assert result.stderr == ""  # the result goes to stdout; stderr is for progress and warnings


@pytest.mark.parametrize(
    ("order", "limit", "code"),
    [
        ("base-opt", "5", 0),  # 3.35x faster
        ("opt-base", "5", 1),  # 235% slower than the "baseline"
        ("opt-base", "300", 0),  # within a generous limit
    ],
    ids=["faster-passes", "slower-fails", "slower-within-limit"],
)
def test_fail_if_slower_gate(pair: tuple[Path, Path], order: str, limit: str, code: int) -> None:
    base, opt = pair if order == "base-opt" else pair[::-1]
    result = runner.invoke(app, ["compare", str(base), str(opt), "--fail-if-slower", limit])
    assert result.exit_code == code, result.output
    if code == 1:
        assert "FAIL" in result.stderr and "slower than the baseline" in result.stderr


def test_compare_json_markdown_html(pair: tuple[Path, Path], tmp_path: Path) -> None:
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    result = runner.invoke(
        app, ["compare", *map(str, pair), "--json", "--markdown", str(md), "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "faster" and doc["speedup"] > 3
    assert "**FASTER**" in md.read_text() and "<svg" in html.read_text()


def test_incomparable_profiles_warn_everywhere(tmp_path: Path) -> None:
    paths = []
    for name, chip in (("a", "gh100"), ("b", "ga100")):
        b = ProfileBuilder(chip=chip)
        b.op("aten::mm", k("sgemm_128x64", 10))
        paths.append(write_profile(tmp_path / f"{name}.json", b.build()))
    md = tmp_path / "c.md"
    for extra in (["--json"], []):
        result = runner.invoke(app, ["compare", *map(str, paths), "--markdown", str(md), *extra])
        assert result.exit_code == 0
        assert "NOT COMPARABLE: chip differs" in result.output  # stdout, or stderr beside --json
    assert "NOT COMPARABLE: chip differs" in md.read_text()
    result = runner.invoke(app, ["compare", *map(str, paths), "--json"])
    assert any("chip" in w for w in json.loads(result.stdout)["warnings"])


def test_report_writes_every_output(pair: tuple[Path, Path], tmp_path: Path) -> None:
    files = {kind: tmp_path / f"r.{kind}" for kind in ("html", "md", "json")}
    result = runner.invoke(
        app,
        [
            "report",
            str(pair[1]),
            "--baseline",
            str(pair[0]),
            "--html",
            str(files["html"]),
            "--markdown",
            str(files["md"]),
            "--perfetto",
            str(files["json"]),
            "--summary",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["kernels"] == 20 and summary["top_operators"]  # 18 kernels and the two memsets of cuDNN attention
    assert "Baseline vs optimized" in files["html"].read_text()
    assert "oprof compare" in files["md"].read_text()
    assert json.loads(files["json"].read_text())["traceEvents"]


def test_report_json(pair: tuple[Path, Path]) -> None:
    result = runner.invoke(app, ["report", str(pair[0]), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["profile"]["kernels"] == 44 and doc["comparison"] is None
    assert doc["findings"]["findings"][0]["rule_id"] == "host_bound"


@pytest.mark.parametrize("command", ["diagnose", "compare", "report"])
def test_missing_profile_is_one_line_exit_2(command: str, pair: tuple[Path, Path], tmp_path: Path) -> None:
    args = [command, str(tmp_path / "missing.json")] + ([str(pair[1])] if command == "compare" else [])
    _one_line_error(runner.invoke(app, args), "no such profile")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"schema_version": 1, "kernels": [', "not valid JSON"),
        (b'{"schema_version": 1, "kernels": [{"id": "x"}]}', "kernels.0"),
    ],
    ids=["truncated", "bad-field"],
)
@pytest.mark.parametrize("command", ["diagnose", "compare", "report"])
def test_invalid_profile_is_one_line_exit_2(
    command: str, content: bytes, needle: str, pair: tuple[Path, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    args = [command, str(pair[0]), str(bad)] if command == "compare" else [command, str(bad)]
    _one_line_error(runner.invoke(app, args), needle)


def test_bad_threshold_is_one_line_exit_2(pair: tuple[Path, Path]) -> None:
    _one_line_error(
        runner.invoke(app, ["diagnose", str(pair[0]), "--threshold", "bogus=1"]), "unknown threshold"
    )


def test_unwritable_output_is_one_line_exit_2(pair: tuple[Path, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(
        runner.invoke(app, ["diagnose", str(pair[0]), "--out", str(blocker / "f.json")]), "cannot write"
    )
