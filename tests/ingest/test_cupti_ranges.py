"""CUPTI range-profiler traces: the ranges are the kernels, their args a counter source."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_kineto
from profiler_core.profile_io import read_profile
from profiler_core.schema import CounterSource, Tier

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(data_dir: Path) -> Path:
    return data_dir / "foreign_traces" / "hta_a100_cupti_range.json.gz"


def _edited(trace: Path, tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    edit(doc["traceEvents"])
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(doc))
    return out


def test_ranges_become_kernels_and_counter_rows(trace: Path) -> None:
    kt = read_kineto(trace)
    assert len(kt.kernels) == 77 and kt.range_counters is not None
    assert len(kt.range_counters.rows) == 77 and kt.range_counters.source == "cupti-range"
    # HTA asked for smsp__ spellings; the whole-GPU sums are read under the catalog's sm__ names
    assert "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in kt.range_counters.metrics_returned
    assert all(k.correlation_id is not None for k in kt.kernels)  # each tied to its launch call
    assert any("even split" in n for n in kt.notes)


def test_attribute_reads_the_counters(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = runner.invoke(load_commands(), ["attribute", "--kineto", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    prof = read_profile(out)
    assert len(prof.kernels) == 77
    assert all(k.counter_source is CounterSource.MEASURED for k in prof.kernels)
    assert all(k.attribution.tier is Tier.CUPTI_CORRELATION for k in prof.kernels)
    conv = next(op for op in prof.operators if op.name == "aten::cudnn_convolution")
    assert conv.metrics["inst_ffma"] == 9119334400.0  # the trace's second range, launched by the first conv
    sources = {s.kind: s for s in prof.capture.sources}
    assert "CUPTI range profiler" in (sources["ncu"].detail or "")
    assert "not measured" in (sources["kineto"].detail or "")


def test_ranges_without_matching_launches_stay_unattributed(trace: Path, tmp_path: Path) -> None:
    def drop_one_launch(events: list) -> None:
        events.remove(next(e for e in events if e.get("name") == "cudaLaunchKernel"))

    kt = read_kineto(_edited(trace, tmp_path, drop_one_launch))
    assert len(kt.kernels) == 77 and all(k.correlation_id is None for k in kt.kernels)
    assert any("77 profiler ranges but 76 kernel launch calls" in n for n in kt.notes)


def test_a_counter_that_is_no_number_is_named(trace: Path, tmp_path: Path) -> None:
    def spoil(events: list) -> None:
        rng = next(e for e in events if e.get("cat") == "cuda_profiler_range")
        rng["args"]["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] = "lots"

    with pytest.raises(ArtifactFormatError, match=r"cuda_profiler_range .*'lots', not a number"):
        read_kineto(_edited(trace, tmp_path, spoil))
