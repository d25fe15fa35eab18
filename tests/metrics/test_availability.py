"""Per-chip counter availability against real ``ncu --query-metrics --chip`` lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_ncu
from profiler_core.metrics.availability import (
    ChipMetricList,
    load_chip_metric_list,
    metrics_for_chip,
)
from profiler_core.metrics.catalog import CATALOG

CHIPS = ["ga100", "gh100", "gb100", "gb202", "ad102"]


def _list(data_dir: Path, chip: str) -> ChipMetricList:
    return load_chip_metric_list(data_dir / "ncu_metrics" / f"metrics_{chip}.txt.gz")


@pytest.mark.parametrize("chip", CHIPS, ids=CHIPS)
def test_all_twenty_resolve_on_every_listed_chip(data_dir: Path, chip: str) -> None:
    metric_list = _list(data_dir, chip)
    assert metric_list.chip == chip
    assert len(metric_list.types) > 2500
    resolved = metrics_for_chip(chip, metric_list)
    assert [c.field for c in resolved] == [spec.field for spec in CATALOG]
    missing = [(c.ncu_name, c.reason) for c in resolved if not c.available]
    assert missing == []


@pytest.mark.parametrize("chip", CHIPS, ids=CHIPS)
def test_dram_byte_names_per_chip(data_dir: Path, chip: str) -> None:
    by_field = {c.field: c.ncu_name for c in metrics_for_chip(chip, _list(data_dir, chip))}
    renamed = chip == "gb202"  # consumer Blackwell renamed the DRAM byte counters
    read, written = by_field["dram_bytes_read"], by_field["dram_bytes_written"]
    assert read == ("dram__bytes_op_read.sum" if renamed else "dram__bytes_read.sum")
    assert written == ("dram__bytes_op_write.sum" if renamed else "dram__bytes_write.sum")


def test_gb202_does_not_offer_the_hopper_names(data_dir: Path) -> None:
    gb202 = _list(data_dir, "gb202")
    assert gb202.why_not("dram__bytes_read.sum") == "dram__bytes_read.sum not offered by ncu on gb202"
    assert gb202.why_not("dram__bytes_op_read.sum") is None
    assert _list(data_dir, "gh100").why_not("dram__bytes_op_read.sum") is not None


def test_suffix_must_fit_the_metric_type(data_dir: Path) -> None:
    gh100 = _list(data_dir, "gh100")
    assert gh100.types["lts__t_sector_hit_rate"] == "Ratio"
    assert gh100.why_not("lts__t_sector_hit_rate.pct") is None
    assert "not a valid suffix for the Ratio" in (gh100.why_not("lts__t_sector_hit_rate.sum") or "")
    assert gh100.why_not("sm__throughput.avg.pct_of_peak_sustained_elapsed") is None
    assert gh100.why_not("sm__cycles_active.median") is not None
    assert gh100.why_not("launch__registers_per_thread") is None  # launch statistics: every chip


def test_what_ncu_returned_on_the_h200(joinable: Path) -> None:
    returned = read_ncu(joinable / "ncu_full_raw.csv").metrics_returned
    assert all(c.available for c in metrics_for_chip("gh100", returned))


def test_a_counter_missing_is_null_with_a_reason_never_a_substitute(joinable: Path) -> None:
    # Hopper's names, checked as if the run were on gb202: the DRAM byte counters are missing there.
    returned = read_ncu(joinable / "ncu_full_raw.csv").metrics_returned
    resolved = {c.field: c for c in metrics_for_chip("gb202", returned)}
    dram = resolved["dram_bytes_read"]
    assert (dram.available, dram.ncu_name) == (False, "dram__bytes_op_read.sum")
    assert dram.reason == "dram__bytes_op_read.sum not offered by ncu on gb202"
    assert sum(not c.available for c in resolved.values()) == 2


def test_without_evidence_names_only(data_dir: Path) -> None:
    resolved = metrics_for_chip("GB202")
    assert all(c.available and c.reason is None for c in resolved)
    assert {c.ncu_name for c in resolved} >= {"dram__bytes_op_read.sum", "dram__bytes_op_write.sum"}


def test_list_of_another_chip_is_refused(data_dir: Path) -> None:
    with pytest.raises(ArtifactFormatError, match="for gh100, not gb202"):
        metrics_for_chip("gb202", _list(data_dir, "gh100"))


@pytest.mark.parametrize("name", ["ncu_empty.csv", "output_code_no_kernels.log"], ids=["empty", "not-a-list"])
def test_not_a_metric_list(data_dir: Path, name: str) -> None:
    with pytest.raises(ArtifactFormatError, match="ncu --query-metrics --chip"):
        load_chip_metric_list(data_dir / "broken" / name)


