"""read_ncu on real H200 exports (raw page, details page, .ncu-rep) and on broken files."""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError, ToolNotFoundError
from profiler_core.ingest import read_ncu
from profiler_core.ingest.ncu_nvtx import nvtx_stack, strip_nvtx_rename
from profiler_core.ingest.ncu_units import normalise_unit
from profiler_core.metrics.catalog import CATALOG
from profiler_core.records import CounterRow

TWENTY = frozenset(spec.ncu_name for spec in CATALOG)


def _raw_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


@pytest.mark.parametrize(
    ("name", "launches"),
    [("ncu_full_raw.csv", 44), ("ncu_per_config_raw.csv", 14)],
    ids=["full", "per-config"],
)
def test_raw_page_rows_in_id_order(joinable: Path, name: str, launches: int) -> None:
    report = read_ncu(joinable / name)
    assert report.source == "csv"
    assert len(report.rows) == launches
    assert [row.ncu_id for row in report.rows] == list(range(launches))
    assert report.metrics_returned == TWENTY  # all 20 came back on the H200
    assert all(set(row.metrics) == TWENTY for row in report.rows)


def test_values_match_the_text_exactly(joinable: Path) -> None:
    path = joinable / "ncu_full_raw.csv"
    header, _units, *data = _raw_rows(path)
    report = read_ncu(path)
    checked = 0
    for text_row, row in zip(data, report.rows, strict=True):
        for column, cell in zip(header, text_row, strict=True):
            if column in TWENTY:
                assert row.metrics[column] == float(cell.replace(",", ""))
                checked += "," in cell
    assert checked > 100  # many cells carry thousands separators
    first = report.rows[0]
    assert first.metrics["dram__bytes_read.sum"] == 530176.0  # printed "530,176"
    assert first.metrics["sm__cycles_active.sum"] == 292409.0  # printed "292,409"


def test_identity_columns(joinable: Path) -> None:
    row = read_ncu(joinable / "ncu_full_raw.csv").rows[1]
    assert row.name.startswith("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8")
    assert (row.grid, row.block) == ((8, 4, 4), (128, 1, 1))
    assert (row.stream, row.device, row.context, row.process_id) == (7, 0, 1, 797)


def test_units_are_base(joinable: Path) -> None:
    units = read_ncu(joinable / "ncu_full_raw.csv").units
    assert units["gpu__time_duration.sum"] == "ns"
    assert units["dram__bytes_read.sum"] == "byte"
    assert units["launch__shared_mem_per_block_dynamic"] == "byte/block"
    assert units["sm__inst_executed.avg.per_cycle_active"] == "inst/cycle"


def test_nvtx_stacks_name_the_operator(joinable: Path) -> None:
    rows = read_ncu(joinable / "ncu_full_raw.csv").rows
    for row in rows:
        assert row.nvtx_stack[0].startswith("Torch-Compiled Region:")
        assert row.nvtx_stack[1].startswith("## Call CompiledFxGraph")
        innermost = row.nvtx_stack[-1]
        assert "op_id = " in innermost
        if row.name.startswith("triton_"):
            assert innermost.startswith(row.name + ", op_id = ")  # Inductor names the range after the kernel
        else:
            assert innermost.startswith(("aten::mm,", "aten::bmm,"))
    assert sum(r.nvtx_stack[-1].startswith("aten::") for r in rows) == 26  # 13 cuBLAS launches x 2 iterations


def test_non_base_units_are_converted(tiny: Path, joinable: Path) -> None:
    path = tiny / "ncu_compiled_mlp_ln_raw.csv"
    header, units_row, first, *_ = _raw_rows(path)
    column = header.index("gpu__time_duration.sum")
    assert units_row[column] == "us"  # the export really is in microseconds
    report = read_ncu(path)
    assert report.units["gpu__time_duration.sum"] == "ns"
    assert report.rows[0].metrics["gpu__time_duration.sum"] == pytest.approx(float(first[column]) * 1000)
    # The same LayerNorm kernel shape, measured in base units in another capture: same magnitude.
    ln_tiny = [r for r in report.rows if "layer_norm" in r.name]
    ln_base = [r for r in read_ncu(joinable / "ncu_full_raw.csv").rows if "layer_norm" in r.name]
    ratio = ln_tiny[0].metrics["gpu__time_duration.sum"] / ln_base[0].metrics["gpu__time_duration.sum"]
    assert 0.5 < ratio < 2.0


def test_details_page_from_stdout(tiny: Path) -> None:
    path = tiny / "ncu_eager_mlp_ln_nvtx_rename.csv"
    assert path.read_text().startswith("==WARNING==")  # ncu chatter before the header
    report = read_ncu(path)
    assert len(report.rows) == 14  # 28 lines: one per launch and metric
    assert report.metrics_returned == {"gpu__time_duration.sum", "launch__registers_per_thread"}
    first = report.rows[0]
    assert first.metrics == {"gpu__time_duration.sum": 2400.0, "launch__registers_per_thread": 18.0}
    assert first.nvtx_stack == ("aten::linear, seq = 18, op_id = 1", "aten::addmm, seq = 19, op_id = 5")
    # --print-nvtx-rename kernel prefixed the name with the range; the reader takes it off.
    assert first.name.startswith("void scal_kernel<float, float")
    assert not any(row.name.startswith("aten::") for row in report.rows)


def test_requested_names_ncu_dropped_are_reported(joinable: Path) -> None:
    requested = {*TWENTY, "dram__bytes_bogus.sum"}
    report = read_ncu(joinable / "ncu_per_config_raw.csv", requested=requested)
    assert report.metrics_returned == TWENTY
    assert "dram__bytes_bogus.sum" not in report.rows[0].metrics


def test_requested_subset_keeps_only_those(joinable: Path) -> None:
    wanted = {"gpu__time_duration.sum", "dram__bytes_read.sum"}
    report = read_ncu(joinable / "ncu_full_raw.csv", requested=wanted)
    assert report.metrics_returned == wanted
    assert set(report.units) == wanted
    assert all(set(row.metrics) == wanted for row in report.rows)


def test_ncu_rep_matches_its_csv_export(joinable: Path) -> None:
    pytest.importorskip("ncu_report")
    from_csv = read_ncu(joinable / "ncu_full_raw.csv")
    from_rep = read_ncu(joinable / "ncu_full.ncu-rep.xz", requested=TWENTY)
    assert from_rep.source == "ncu-rep"
    assert from_rep.metrics_returned == from_csv.metrics_returned
    assert from_rep.units == from_csv.units
    assert len(from_rep.rows) == len(from_csv.rows) == 44
    for a, b in zip(from_csv.rows, from_rep.rows, strict=True):
        assert (a.ncu_id, a.name, a.grid, a.block) == (b.ncu_id, b.name, b.grid, b.block)
        assert (a.stream, a.device, a.context, a.nvtx_stack) == (b.stream, b.device, b.context, b.nvtx_stack)
        for name, value in a.metrics.items():
            other = b.metrics[name]
            assert value is not None and other is not None
            # The CSV prints rates with two decimals; the report holds full precision.
            assert math.isclose(value, other, rel_tol=1e-3, abs_tol=0.006), (a.ncu_id, name, value, other)


def test_ncu_rep_without_ncu_report_says_how_to_proceed(
    joinable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # makes the import fail
    with pytest.raises(ToolNotFoundError, match=r"pip install operator-profiler\[ncu\].*--print-units base"):
        read_ncu(joinable / "ncu_full.ncu-rep.xz")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ncu_missing_columns.csv", r"lacks column\(s\) 'Block Size', 'Grid Size'"),
        ("ncu_unknown_unit.csv", r"unknown unit 'fortnight' for metric 'gpu__time_duration.sum'.*units base"),
        ("ncu_truncated.csv", r"truncated"),
        ("ncu_empty.csv", r"empty file"),
        ("ncu_no_rows.csv", r"no kernel rows"),
        ("ncu_bad_value.csv", r"'dram__bytes_read.sum' has the non-numeric value '530,17x'"),
        ("not_a_report.ncu-rep", r"no profiled kernels"),
        ("not_xz.ncu-rep.xz", r"not a valid xz file"),
        ("provenance_truncated.log", r"not an Nsight Compute result"),
        ("does_not_exist.csv", r"no such"),
    ],
    ids=["missing-columns", "unknown-unit", "truncated", "empty", "no-rows", "bad-value", "not-a-report",
         "not-xz", "wrong-kind", "missing-file"],
)
def test_broken_inputs_raise_the_named_error(data_dir: Path, name: str, message: str) -> None:
    if name.endswith(".ncu-rep"):
        pytest.importorskip("ncu_report")
    with pytest.raises(ArtifactFormatError, match=message):
        read_ncu(data_dir / "broken" / name)


@pytest.mark.parametrize(
    ("unit", "value", "expected_unit", "expected"),
    [
        ("us", 8.032, "ns", 8032.0),
        ("msecond", 1.5, "ns", 1.5e6),
        ("Kbyte", 6.14, "byte", 6140.0),  # ncu's prefixes are decimal
        ("Mbyte", 2.0, "byte", 2e6),
        ("Gbyte/second", 3.35, "byte/second", 3.35e9),
        ("Kbyte/block", 1.02, "byte/block", 1020.0),
        ("cycle/nsecond", 1.98, "cycle/second", 1.98e9),
        ("Ghz", 1.98, "cycle/second", 1.98e9),
        ("register/thread", 80.0, "register/thread", 80.0),
        ("%", 12.5, "%", 12.5),
        ("", 32.0, "", 32.0),
    ],
    ids=lambda v: str(v),
)
def test_unit_normalisation(unit: str, value: float, expected_unit: str, expected: float) -> None:
    base, scale = normalise_unit(unit, "some__metric.sum")
    assert base == expected_unit
    assert value * scale == pytest.approx(expected)


def test_unknown_unit_names_metric_and_fix() -> None:
    with pytest.raises(ArtifactFormatError, match=r"'parsec'.*'l1tex__foo.sum'.*--print-units base"):
        normalise_unit("parsec", "l1tex__foo.sum")


def test_nvtx_cell_with_quotes_in_a_range() -> None:
    cell = '12  "<default domain>:say "hi", op_id = 3:none:none:none:none:none:none" '
    assert nvtx_stack(cell) == ('say "hi", op_id = 3',)
    assert nvtx_stack("") == ()
    with pytest.raises(ArtifactFormatError, match="NVTX stack"):
        nvtx_stack('12  "not an entry"')


def test_rename_prefix_only_when_it_is_a_range() -> None:
    stack = ("aten::linear, op_id = 1", "aten::addmm, op_id = 5")
    assert strip_nvtx_rename("aten::addmm, op_id = 5/void gemm<float>()", stack) == "void gemm<float>()"
    assert strip_nvtx_rename("void kernel<operator/>()", stack) == "void kernel<operator/>()"


def test_counter_row_field_order_matches_the_csv_reader() -> None:
    # ncu_csv builds rows positionally (it is twice as fast as keywords at 500k rows).
    assert [f.name for f in dataclasses.fields(CounterRow)] == [
        "ncu_id", "name", "grid", "block", "stream", "device", "metrics", "nvtx_stack", "process_id",
        "context",
    ]


def _with_extra_column(source: Path, target: Path, name: str, unit: str, values: list[str]) -> Path:
    header, units, *data = _raw_rows(source)
    with target.open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow([*header, name])
        writer.writerow([*units, unit])
        for row, value in zip(data, values, strict=True):
            writer.writerow([*row, value])
    return target


def test_text_valued_metric_is_left_out(tiny: Path, tmp_path: Path) -> None:
    # A raw page exported without --metrics carries string metrics such as the cache config.
    source = tiny / "ncu_compiled_mlp_ln_raw.csv"
    launches = len(_raw_rows(source)) - 2
    values = ["n/a"] + ["CachePreferNone"] * (launches - 1)
    path = _with_extra_column(source, tmp_path / "text.csv", "launch__func_cache_config", "", values)
    report = read_ncu(path)
    assert "launch__func_cache_config" not in report.metrics_returned
    assert "launch__func_cache_config" not in report.units
    assert all("launch__func_cache_config" not in row.metrics for row in report.rows)
    # The scaled column next to it is still converted on every row.
    plain = read_ncu(source)
    assert [r.metrics for r in report.rows] == [r.metrics for r in plain.rows]


def test_metric_mixing_numbers_and_text_is_corrupt(tiny: Path, tmp_path: Path) -> None:
    source = tiny / "ncu_compiled_mlp_ln_raw.csv"
    launches = len(_raw_rows(source)) - 2
    values = ["3"] * (launches - 1) + ["three"]
    path = _with_extra_column(source, tmp_path / "mixed.csv", "launch__waves_per_multiprocessor", "", values)
    with pytest.raises(ArtifactFormatError, match="mix numbers and text"):
        read_ncu(path)
