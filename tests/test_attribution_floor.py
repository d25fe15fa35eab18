"""benchmarks/attribution_floor.py: the floor that bench_attribute.py prints beside the engine does
the work it claims: every kernel joined and attributed, the engine's operators, their durations."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def floor():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "benchmarks"))  # the floor imports bench_attribute beside it
    try:
        import attribution_floor

        yield attribution_floor
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def _first_seen(labels: list) -> list[int]:
    """Labels renumbered by first appearance: two partitions are equal when these are."""
    seen: dict = {}
    return [seen.setdefault(x, len(seen)) for x in labels]


def test_the_floor_groups_the_kernels_as_the_engine_does(floor, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench_attribute import replicate

    from profiler_core.attribution import attribute

    copies = 3
    out = floor.attribute_floor(floor.inputs("joinable", copies))
    assert out["agree"].all() and (out["tier"] < 4).all()  # every kernel joined and attributed
    kin, nsy, ncu, ind, _ = replicate("joinable", copies)
    profile = attribute(kineto=kin, nsys=nsy, ncu=ncu, inductor=ind)
    kernels = [k for k in profile.kernels if k.kind == "kernel"]
    assert len(kernels) == len(out["name"]) == 44 * copies
    assert [k.start_ns for k in kernels] == out["start"].tolist()  # the same launch order
    assert _first_seen([k.attribution.operator_key for k in kernels]) == _first_seen(out["group"].tolist())
    assert len(profile.operators) == len(out["op_first"])
    by_key = {op.key: op.duration_ns for op in profile.operators}
    durations = sorted(by_key.values())
    assert sorted(out["op_duration"].astype(np.int64).tolist()) == durations
    assert floor.write_floor(out, floor.inputs("joinable", 1)["metric_names"], tmp_path) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernels.parquet", "operators.parquet"]
