"""Counters no GPU could have measured are refused on read, in profile.json and in the columnar form.

The profile is a real H200 capture's (sdpa_attention baseline); one kernel's DRAM bytes are
scaled by 10^9, which no memory moves in the kernel's time. The untouched profile must load.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from profiler_core.attribution import attribute_run
from profiler_core.errors import SchemaError
from profiler_core.physical_checks import HEADROOM, dram_limit, dram_problem
from profiler_core.profile_io import read_profile, write_profile

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"


@pytest.fixture(scope="module")
def rows_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rows") / "profile.json"
    write_profile(out, attribute_run(RUN))
    return out


def _measured(doc: dict) -> int:
    return next(i for i, k in enumerate(doc["kernels"]) if k["counters"].get("dram_bytes_read"))


def test_the_real_profile_is_within_the_chips_bandwidth(rows_profile: Path) -> None:
    profile = read_profile(rows_profile)
    assert profile.capture.gpu_name and "H200" in profile.capture.gpu_name
    assert any(k.counters.get("dram_bytes_read") for k in profile.kernels)


@pytest.mark.parametrize("gpu", [None, "keep"])
def test_dram_bytes_no_chip_moves_are_refused_in_json(rows_profile: Path, tmp_path: Path, gpu: str | None) -> None:
    doc = json.loads(rows_profile.read_bytes())
    j = _measured(doc)
    doc["kernels"][j]["counters"]["dram_bytes_read"] *= 1e9
    if gpu is None:
        doc["capture"]["gpu_name"] = None
    bad = tmp_path / "profile.json"
    bad.write_text(json.dumps(doc))
    chip = "H200 SXM" if gpu else "fastest known GPU"
    with pytest.raises(SchemaError, match=rf"kernels\[{j}\] \(id {j}\): .* DRAM bytes .* more than 10x the {chip}"):
        read_profile(bad)


def test_dram_bytes_no_chip_moves_are_refused_in_the_columnar_form(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_COLUMNAR_KERNELS", "0")
    profile = attribute_run(RUN)
    table = profile.kernels
    col = table.counter_fields.index("dram_bytes_read")
    row = int(np.flatnonzero(np.nan_to_num(table.counter_values[:, col]) > 0)[0])
    j = int(np.flatnonzero(table.counter_row == row)[0])
    table.counter_values[row, col] *= 1e9
    write_profile(tmp_path / "profile.json", profile)  # a table recorded with its digest: only the range check
    with pytest.raises(SchemaError, match=rf"kernels\[{j}\] \(id {j}\): .* more than 10x the H200 SXM's DRAM"):
        read_profile(tmp_path / "profile.json")


def test_the_bound_is_the_chips_bandwidth_times_the_headroom() -> None:
    limit, chip = dram_limit("NVIDIA H200")
    assert chip == "H200 SXM" and limit == pytest.approx(4.8e12 * HEADROOM)
    dur = np.array([10_000, 10_000], dtype=np.int64)
    at = limit * 10_000e-9
    assert dram_problem(np.array([at * 0.99, np.nan]), dur, "NVIDIA H200") is None
    assert (dram_problem(np.array([np.nan, at * 1.01]), dur, "NVIDIA H200") or "").startswith("kernels[1]")
    # a kernel shorter than 1 us is held to what the chip moves in 1 us, not waved through
    assert dram_problem(np.array([limit * 1e-6 * 2]), np.array([0]), "NVIDIA H200") is not None
