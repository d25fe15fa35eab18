"""The nsys and ncu readers hand their columns to the engine beneath ``TableRecords``.

A caller that reads records gets the list it always got (built once, on first read); the
attribution engine reads the columns and builds no record, with the same profile as from lists.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from profiler_core.attribution import attribute
from profiler_core.attribution.columns import Interner, column, dim_codes, encode_attr, known, taken, values
from profiler_core.attribution.kernel_build import counter_values
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.ingest.column_records import timeline_records
from profiler_core.profile_io import write_profile
from profiler_core.record_columns import TableRecords

REPO = Path(__file__).resolve().parents[2]
GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline_nsys"
CAPTURES = {  # kineto, nsys, ncu, inductor
    "joinable": ("kineto.json", "nsys.sqlite", "ncu_full_raw.csv", "torch_trace.tgz"),
    "gpt2": ("kineto.json.gz", "timeline.sqlite", "counters.csv", "inductor"),
}


def _root(name: str, joinable: Path) -> Path:
    return joinable if name == "joinable" else GPT2


def _lazy(*seqs: object) -> list[bool]:
    return [isinstance(s, TableRecords) and s._records is None for s in seqs]


def test_records_are_built_on_first_read_and_behave_as_the_list(joinable: Path) -> None:
    kernels = read_nsys(joinable / "nsys.sqlite").kernels
    assert isinstance(kernels, TableRecords) and _lazy(kernels) == [True]
    n = len(kernels)
    assert n == kernels.table.num_rows > 3 and _lazy(kernels) == [True]
    assert kernels.column("start_ns").to_pylist() == sorted(kernels.column("start_ns").to_pylist())
    assert _lazy(kernels) == [True]  # reading a column builds nothing
    built = timeline_records(kernels.table)
    assert kernels[0] == built[0] and kernels[-1] == built[-1] and kernels[1:3] == built[1:3]
    assert _lazy(kernels) == [False]
    assert kernels == built and list(kernels) == built and kernels + [] == built and [] + kernels == built
    assert pickle.loads(pickle.dumps(kernels)) == built
    with pytest.raises(IndexError):
        kernels[n]
    order = np.arange(n)[::-1].copy()
    fresh = read_nsys(joinable / "nsys.sqlite").kernels
    twice = fresh.take(order).take(np.array([0, 2, 1]))
    assert _lazy(fresh, twice) == [True, True]
    assert twice.column("start_ns").to_pylist() == [built[i].start_ns for i in order[[0, 2, 1]].tolist()]
    assert twice.records == [built[i] for i in order[[0, 2, 1]].tolist()]
    assert fresh.take(np.arange(n)) is fresh
    assert kernels.take(order).records == built[::-1]  # records already built are taken, not built again


def _records_and_table() -> tuple[list[SimpleNamespace], TableRecords]:
    """Rows with nulls, a dictionary holding one text twice, and launch dimensions with a null x or y."""
    names = pa.DictionaryArray.from_arrays(pa.array([2, 0, None, 1, 2, 0], pa.int32()),
                                           pa.array(["relu", "gemm", "relu"]))
    xs, ys, zs = [8, None, 8, 4, 8, 2], [1, 3, 1, None, 1, 2], [1, 1, 1, 1, 1, 2]
    table = pa.table({"name": names, "start_ns": pa.array([5, None, 7, 9, 11, 13], pa.int64()),
                      "short_name": pa.array(["b", "a", None, "b", "c", None]),
                      "grid_x": pa.array(xs, pa.int64()), "grid_y": pa.array(ys, pa.int64()),
                      "grid_z": pa.array(zs, pa.int64())})

    def build(t: pa.Table) -> list[SimpleNamespace]:
        rows = t.to_pylist()
        return [SimpleNamespace(name=r["name"], start_ns=r["start_ns"], short_name=r["short_name"],
                                grid=None if r["grid_x"] is None else (r["grid_x"], r["grid_y"], r["grid_z"]))
                for r in rows]

    return build(table), TableRecords(table, build)


def test_columns_read_off_the_table_equal_the_records_read_one_by_one() -> None:
    records, table = _records_and_table()
    for attr in ("name", "short_name"):
        a, b = Interner(), Interner()
        a.code("seeded"), b.code("seeded")  # codes go on from what the interner holds
        assert encode_attr(a, table, attr).tolist() == encode_attr(b, records, attr).tolist()
        assert a.values == b.values  # the same first-seen order
    a, b = Interner(), Interner()
    assert dim_codes(table, "grid", a).tolist() == dim_codes(records, "grid", b).tolist()
    assert a.values == b.values == [(8, 1, 1), (4, None, 1), (2, 2, 2)]
    assert column(table, "start_ns", -7).tolist() == column(records, "start_ns", -7).tolist() == [5, -7, 7, 9, 11, 13]
    assert known(table, "start_ns").tolist() == known(records, "start_ns").tolist()
    assert values(table, "short_name") == values(records, "short_name")
    order = np.array([4, 0, 3])
    assert encode_attr(Interner(), taken(table, order), "name").tolist() == \
        encode_attr(Interner(), taken(records, order), "name").tolist() == [0, 0, 1]
    assert table._records is None


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_counter_values_from_columns_equal_those_from_rows(capture: str, joinable: Path) -> None:
    ncu = read_ncu(_root(capture, joinable) / CAPTURES[capture][2])
    from_columns = counter_values(ncu.rows, ncu)
    assert _lazy(ncu.rows) == [True]
    from_rows = counter_values(list(ncu.rows), ncu)
    assert np.isfinite(from_rows.values).any()
    np.testing.assert_array_equal(from_columns.values, from_rows.values)
    assert from_columns.ncu_id.tolist() == from_rows.ncu_id.tolist()


def _written(profile: object) -> dict[str, object]:
    """The files a profile is written as: JSON texts with the Parquet tables' names and the creation time made
    neutral, tables."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        write_profile(Path(tmp) / "profile.json", profile)  # type: ignore[arg-type]
        out: dict[str, object] = {}
        for f in Path(tmp).iterdir():
            name = re.sub(r"\.[0-9a-f]{16}\.", ".", f.name)
            data = f.read_bytes()
            # (the creation time too: two attributions a moment apart may straddle a second)
            out[name] = pq.read_table(io.BytesIO(data)) if name.endswith(".parquet") else \
                re.sub(rb'"created_at":"[^"]*"', b'"created_at":""', re.sub(rb"\.[0-9a-f]{16}\.", b".", data))
        return out


@pytest.mark.parametrize("capture", sorted(CAPTURES))
@pytest.mark.parametrize("columnar_above", [None, 0])
def test_engine_reads_the_columns_and_builds_no_record(capture: str, columnar_above: int | None,
                                                       joinable: Path) -> None:
    root = _root(capture, joinable)
    kin_name, nsys_name, ncu_name, ind_name = CAPTURES[capture]
    kin, ind = read_kineto(root / kin_name), read_inductor(root / ind_name)
    nsys, ncu = read_nsys(root / nsys_name), read_ncu(root / ncu_name)
    from_columns = attribute(kineto=kin, nsys=nsys, ncu=ncu, inductor=ind, columnar_above=columnar_above)
    assert _lazy(nsys.kernels, nsys.runtime_calls, nsys.nvtx_ranges, ncu.rows) == [True] * 4
    as_lists = attribute(kineto=kin, inductor=ind, columnar_above=columnar_above,
                         nsys=dataclasses.replace(nsys, kernels=list(nsys.kernels),
                                                  runtime_calls=list(nsys.runtime_calls),
                                                  nvtx_ranges=list(nsys.nvtx_ranges)),
                         ncu=dataclasses.replace(ncu, rows=list(ncu.rows)))
    a, b = _written(from_columns), _written(as_lists)
    assert sorted(a) == sorted(b) and len(a) == (1 if columnar_above is None else 3)
    for name, got in a.items():
        want = b[name]
        assert got.equals(want) if isinstance(got, pa.Table) else got == want, name
