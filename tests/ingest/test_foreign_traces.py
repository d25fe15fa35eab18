"""Kineto traces recorded by other projects (tests/data/foreign_traces, see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from profiler_core.attribution.aggregate import aggregate_arrays
from profiler_core.cli import load_commands
from profiler_core.ingest import read_kineto
from profiler_core.ingest.kineto_links import relink_launches
from profiler_core.profile_io import read_profile
from profiler_core.schema import Tier

runner = CliRunner()


@pytest.fixture(scope="module")
def foreign(data_dir: Path) -> Path:
    return data_dir / "foreign_traces"


def test_memcpy_memset_trace_attributes_without_launches(foreign: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = runner.invoke(load_commands(), [
        "attribute", "--kineto", str(foreign / "hta_a100_memcpy_memset.json.gz"), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    prof = read_profile(out)
    kinds = sorted(k.kind for k in prof.kernels)
    assert kinds == ["kernel"] * 6 + ["memcpy"] * 6 + ["memset"] * 6
    # the runtime calls that launched them were cut out of this trace: no operator can be named,
    # and each kernel says why instead of borrowing a guess
    assert all(k.attribution.tier is Tier.UNATTRIBUTED and k.attribution.reason for k in prof.kernels)
    assert prof.operators == []
    assert json.loads(result.stdout)["coverage"]["by_tier"]["unattributed"]["kernel_count"] == 18


def test_aggregating_no_kernels_gives_empty_tables() -> None:
    # an operator table with no kernel at all (every kernel unattributed): nothing to aggregate
    empty = np.empty(0, dtype=np.int64)
    agg = aggregate_arrays(np.empty((0, 20)), np.empty(0), empty, empty, 0)
    assert agg.values.shape == (0, 20) and agg.missing.shape == (0, 20)


def test_old_external_ids_are_relinked_through_the_launch(foreign: Path) -> None:
    trace = read_kineto(foreign / "hta_a100_event_sync.json.gz")
    op_ids = {op.external_id: op.name for op in trace.cpu_ops}
    named = {k.correlation_id: op_ids.get(k.external_id) for k in trace.kernels}
    # kernel 1482 carried its own correlation id as External id; its launch ran inside aten::fill_
    assert named[1482] == "aten::fill_"
    assert sum(v is not None for v in named.values()) == 4


def test_attribution_names_operators_of_the_old_trace(foreign: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = runner.invoke(load_commands(), [
        "attribute", "--kineto", str(foreign / "hta_a100_event_sync.json.gz"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    prof = read_profile(out)
    names = sorted(op.name for op in prof.operators)
    assert names == ["aten::_local_scalar_dense", "aten::fill_", "aten::gt", "aten::sum"]
    tiers = [k.attribution.tier for k in prof.kernels]
    assert tiers.count(Tier.CUPTI_CORRELATION) == 4


def test_current_traces_are_left_alone(tiny: Path) -> None:
    trace = read_kineto(tiny / "kineto_compiled_mlp.json")
    kernels = trace.kernels.table  # type: ignore[attr-defined]  # the reader's TableRecords
    again, relinked = relink_launches(kernels, trace.cpu_ops.table, trace.runtime_calls.table)  # type: ignore[attr-defined]
    assert relinked == 0 and again is kernels
