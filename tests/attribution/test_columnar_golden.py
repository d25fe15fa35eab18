"""The columnar engine against the object engine it replaced, byte for byte, on every shipped capture.

Small captures: profile.json identical to the object engine's. The columnar form (forced with
``columnar_above=0``): profile.json + Parquet, read back and turned into the row form, identical
again. A truncated or missing Parquet table is a named error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiler_core.attribution import attribute_run, engine
from profiler_core.attribution.columns import ArrowStrings
from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.attribution.sources import capture_meta_from_manifest
from profiler_core.errors import ArtifactFormatError, SchemaError
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.profile_io import read_profile, write_profile
from profiler_core.rundir import find_run_artifacts
from profiler_core.schema import Profile
from tests.attribution import object_engine

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "examples" / "captures" / "h200").glob("*/*/manifest.json"))
IDS = [f"{r.parent.name}/{r.name}" for r in RUNS]


def _inputs(run: Path) -> dict:
    art = find_run_artifacts(run)
    try:
        ind = read_inductor(art.inductor) if art.inductor else None
    except ArtifactFormatError:
        ind = None  # attribute_run goes on without them too (inductor_optional)
    return {"kineto": read_kineto(art.kineto) if art.kineto else None,
            "nsys": read_nsys(art.nsys) if art.nsys else None, "ncu": read_ncu(art.ncu) if art.ncu else None,
            "inductor": ind, "capture": capture_meta_from_manifest(art.manifest, run)}


def _json(profile: Profile) -> bytes:
    return profile.__pydantic_serializer__.to_json(profile, indent=1)


def _rows(profile: Profile) -> Profile:
    """A profile read in its columnar form, as the row form (kernels as models, no table pointer)."""
    return profile.as_rows()


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_columnar_engine_matches_the_object_engine_byte_for_byte(run: Path, tmp_path: Path) -> None:
    inputs = _inputs(run)
    expected = _json(object_engine.attribute(**inputs))
    rows = engine.attribute(**inputs)
    assert isinstance(rows.kernels, list)
    assert _json(rows) == expected
    columnar = engine.attribute(**inputs, columnar_above=0)
    assert isinstance(columnar.kernels, KernelTable)
    write_profile(tmp_path / "profile.json", columnar)
    assert len(list(tmp_path.glob("profile.kernels.*.parquet"))) == 1
    back = read_profile(tmp_path / "profile.json")
    assert isinstance(back.kernels, KernelTable) and back.kernel_table is not None
    assert _json(_rows(back)) == expected


def test_run_with_module_paths_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = ROOT / "tests" / "data" / "cpu_modules"
    if not (run / "manifest.json").is_file():
        run = next(r for r in RUNS if r.name == "baseline")
    expected = _json(attribute_run(run))
    monkeypatch.setenv(engine.COLUMNAR_ENV, "0")
    columnar = attribute_run(run)
    assert isinstance(columnar.kernels, KernelTable)
    write_profile(tmp_path / "profile.json", columnar)
    assert _json(_rows(read_profile(tmp_path / "profile.json"))) == expected


def test_threshold_is_configurable_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.COLUMNAR_ENV, "12")
    assert engine.columnar_threshold() == 12
    monkeypatch.setenv(engine.COLUMNAR_ENV, "many")
    with pytest.raises(Exception, match="OPROF_COLUMNAR_KERNELS"):
        engine.columnar_threshold()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("columnar") / "profile.json"
    inputs = _inputs(next(r for r in RUNS if r.parent.name == "gpt2" and r.name == "baseline"))
    write_profile(out, engine.attribute(**inputs, columnar_above=0))
    return out


def _copy(written: Path, tmp_path: Path) -> tuple[Path, Path]:
    for f in written.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "profile.json", _table(tmp_path, "kernels")


def _table(folder: Path, kind: str) -> Path:
    """The one ``kind`` table of the profile in ``folder`` (named by its generation)."""
    (table,) = folder.glob(f"profile.{kind}.*.parquet")
    return table


def test_truncated_parquet_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2])
    with pytest.raises(SchemaError, match=r"profile\.kernels\.\w+\.parquet.*truncated"):
        read_profile(profile)


def test_damaged_parquet_of_the_right_size_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    data = bytearray(table.read_bytes())
    data[-6:] = b"XXXXXX"  # the footer's length and magic
    table.write_bytes(bytes(data))
    with pytest.raises(SchemaError, match="SHA-256 differs"):
        read_profile(profile)
    doc = json.loads(profile.read_bytes())
    del doc["kernel_table"]["sha256"]  # as profiles written before the digest was recorded
    profile.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="not a readable Parquet kernel table"):
        read_profile(profile)


def test_missing_parquet_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    table.unlink()
    with pytest.raises(SchemaError, match="is missing"):
        read_profile(profile)


def test_no_temp_files_are_left_and_the_json_names_the_table(written: Path) -> None:
    names = sorted(p.name for p in written.parent.iterdir())
    assert [n.split(".")[1] for n in names] == ["json", "kernels", "operators"]
    assert names[1].split(".")[2] == names[2].split(".")[2]  # one generation
    assert b'"kernels":[]' in written.read_bytes() and b'"kernel_table":{"format":"parquet"' in written.read_bytes()


def test_truncated_operator_parquet_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, _ = _copy(written, tmp_path)
    table = _table(tmp_path, "operators")
    table.write_bytes(table.read_bytes()[:100])
    with pytest.raises(SchemaError, match=r"profile\.operators\.\w+\.parquet.*truncated"):
        read_profile(profile)


def test_damaged_operator_parquet_without_a_digest_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, _ = _copy(written, tmp_path)
    table = _table(tmp_path, "operators")
    data = bytearray(table.read_bytes())
    data[-6:] = b"XXXXXX"  # the footer's length and magic
    table.write_bytes(bytes(data))
    doc = json.loads(profile.read_bytes())
    del doc["operator_table"]["sha256"]
    profile.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=r"profile\.operators\.\w+\.parquet: not a readable Parquet operator table"):
        read_profile(profile)


def test_the_operator_table_is_decoded_whole_after_the_kernel_tables_arrow_is_released(
        written: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # its key column alone is decoded first (the kernels' key dictionary is checked against it), so
    # the whole kernel table's Arrow is not held with the whole operator table: only the kernel
    # columns not read yet (test_deferred_kernel_columns.py)
    from profiler_core import columnar_profile

    steps: list[str] = []
    parse, build, opened = columnar_profile._parse_parquet, columnar_profile.from_arrow, columnar_profile._open_parquet

    def open_logged(profile_path: Path, ref: Any, what: str, rows: int, data: Any) -> Any:
        steps.append(f"{what} opened")
        return opened(profile_path, ref, what, rows, data)

    def parse_logged(profile_path: Path, ref: Any, what: str, rows: int, data: Any,
                     columns: list[str] | None = None) -> Any:
        steps.append(f"{what} {columns or 'all'}")
        return parse(profile_path, ref, what, rows, data, columns)

    def build_logged(arrow: Any, listed: Any = None) -> Any:
        steps.append(f"kernels built, keys {'given' if listed is not None else 'not given'}")
        return build(arrow, listed)

    monkeypatch.setattr(columnar_profile, "_parse_parquet", parse_logged)
    monkeypatch.setattr(columnar_profile, "from_arrow", build_logged)
    monkeypatch.setattr(columnar_profile, "_open_parquet", open_logged)
    back = read_profile(written)
    # the kernel table is opened, not decoded: its columns are decoded when read (test_deferred_kernel_columns.py)
    assert steps == ["kernel_table opened", "operator_table ['key']", "kernels built, keys given", "operator_table all"]
    assert [op.key for op in back.operators] == [op.key for op in read_profile(written).operators]


def test_operators_are_read_lazily_and_rewritten_as_they_are(written: Path, tmp_path: Path) -> None:
    from profiler_core.attribution.operator_parquet import OperatorColumns

    back = read_profile(written)
    assert isinstance(back.operators, OperatorColumns) and back.operator_table is not None
    assert b'"operators":[]' in written.read_bytes()
    write_profile(tmp_path / "profile.json", back)
    again = read_profile(tmp_path / "profile.json")
    assert _json(_rows(again)) == _json(_rows(back))


def _with_operator(profile: Profile, g: int, **changes: object) -> Profile:
    ops = list(profile.operators)
    ops[g] = ops[g].model_copy(update=changes)
    return profile.model_copy(update={"operators": ops})


def test_checks_on_columns_name_the_first_problem(written: Path) -> None:
    from profiler_core.columnar_profile import columnar_problem as profile_problem
    from profiler_core.profile_io import check_references

    back = read_profile(written)
    key = back.operators[1].key
    with pytest.raises(SchemaError, match=f"operator key '{key}' appears twice"):
        check_references(_with_operator(back, 0, key=key))
    with pytest.raises(SchemaError, match="lists kernel 999999"):
        check_references(_with_operator(back, 2, kernel_ids=[999999]))
    with pytest.raises(SchemaError, match="inherits from operator 'nowhere#0'"):
        check_references(_with_operator(back, 3, inherited_from="nowhere#0"))
    assert profile_problem(back) is None
    problem = profile_problem(_with_operator(back, 4, duration_ns=back.operators[4].duration_ns + 1))
    assert problem is not None and problem.startswith("operators[4]") and "not the sum" in problem
    cov = back.coverage.model_copy(update={"kernel_count": 1})
    assert "coverage says 1 kernels" in (profile_problem(back.model_copy(update={"coverage": cov})) or "")


def test_a_columnar_profile_dumps_as_rows_or_names_the_fix(written: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core import schema

    back = read_profile(written)
    doc = back.model_dump(mode="json")
    assert len(doc["kernels"]) == len(back.kernels) and len(doc["operators"]) == len(back.operators)
    assert "kernel_table" not in doc and "operator_table" not in doc
    monkeypatch.setattr(schema, "EMIT_MAX_KERNELS", 10)
    with pytest.raises(SchemaError, match=r"too many for one JSON document.*profile\.kernels\.parquet"):
        back.model_dump_json()


def test_the_table_builds_the_same_models_by_blocks_as_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    run = next(r for r in RUNS if r.parent.name == "hf_gpt2_train" and r.name == "optimized")
    table = engine.attribute(**_inputs(run), columnar_above=0).kernels
    assert isinstance(table, KernelTable) and len(table) > 100
    monkeypatch.setattr(KernelTable, "MODEL_BLOCK", 7)  # many blocks, a short last one
    by_blocks = table.models()
    one_by_one = [table.model(j) for j in range(len(table))]
    assert [k.id for k in by_blocks] == list(range(len(table)))
    dump = [k.model_dump(mode="json") for k in one_by_one]
    assert [k.model_dump(mode="json") for k in by_blocks] == dump
    assert sum(bool(k["counters"]) for k in dump) > 0 and sum(bool(k["attribution"]["evidence"]) for k in dump) > 0
    # one Evidence object per distinct word of a tier, shared by the kernels it names, across blocks
    entries = [e for k in by_blocks for e in k.attribution.evidence]
    distinct = {(e.tier, e.operator, e.op_id, e.detail) for e in entries}
    assert len({id(e) for e in entries}) == len(distinct) < len(entries)
    # a counter row's dict is worked out once, but each kernel holds a dict of its own
    assert len({repr(k.counters) for k in by_blocks}) < len(by_blocks)
    assert len({id(k.counters) for k in by_blocks}) == len(by_blocks)


def test_operator_columns_build_the_same_models_at_once_as_one_by_one(written: Path) -> None:
    from profiler_core.attribution.operator_parquet import OperatorColumns

    ops = read_profile(written).operators
    assert isinstance(ops, OperatorColumns) and len(ops) > 100
    at_once = [op.model_dump(mode="json") for op in ops.models()]
    one_by_one = [ops.model(g).model_dump(mode="json") for g in range(len(ops))]
    assert at_once == one_by_one
    assert sum(bool(op["metrics"]) for op in at_once) > 0
    # a metrics row's dict is worked out once, but each operator holds a dict of its own
    models = ops.models()
    assert len({repr(op.metrics) for op in models}) < len(models) == len({id(op.metrics) for op in models})
    assert sum(bool(op["kernel_ids"]) for op in at_once) > 0
    # read only (the analysis view's): the same models, operators of one metrics row sharing its dict
    shared = ops.models(read_only=True)
    assert [op.model_dump(mode="json") for op in shared] == at_once
    assert len({id(op.metrics) for op in shared}) == len({repr(op.metrics) for op in shared}) < len(shared)
    # ... and one list or dict per distinct fused ops, source nodes and null reasons; the copying
    # models hold their own
    for field in ("fused_with", "source_nodes", "metric_null_reasons"):
        distinct = len({repr(getattr(op, field)) for op in shared})
        assert len({id(getattr(op, field)) for op in shared}) == distinct < len(shared), field
        assert len({id(getattr(op, field)) for op in models}) == len(models), field
    assert any(op.fused_with for op in shared)


def test_a_columnar_profiles_shape_signature_is_its_operators(written: Path) -> None:
    from profiler_core.analysis.comparability import shape_signature

    back = read_profile(written)
    assert hasattr(back.operators, "shapes")  # read from the dictionary column, no model built
    by_models = frozenset(tuple(s) for op in back.operators.models() for s in (op.input_shapes or [])
                          if isinstance(s, list) and s and all(isinstance(d, int) for d in s))
    assert len(by_models) > 5 and shape_signature(back) == by_models


def test_reading_a_columnar_profile_loads_neither_pandas_nor_the_engine(written: Path) -> None:
    """Reading and checking the Parquet tables, then summarising, stays on pyarrow and numpy: no
    pandas (pyarrow's scalar and numpy conversions import it, 0.3 s), no engine or readers (0.3 s)."""
    probe = ("import json, sys; from pathlib import Path; from profiler_core.profile_io import read_profile; "
             "from profiler_core.attribution.operator_table import slowest; "
             f"p = read_profile(Path({str(written)!r})); top = slowest(p.operators, 3); "
             "print(json.dumps({'kernels': len(p.kernels), 'top': [op.key for op in top], "
             "'loaded': [m for m in ('pandas', 'profiler_core.attribution.engine', 'profiler_core.ingest.nsys', "
             "'profiler_core.ingest.kineto') if m in sys.modules], "
             "'keys_as_list': p.kernels.operator_keys._values is not None}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert got["kernels"] > 100 and len(got["top"]) == 3
    assert got["loaded"] == []
    assert got["keys_as_list"] is False  # the operator keys stayed Arrow: nothing asked for one


def test_operator_keys_read_as_arrow_are_the_keys_written(written: Path) -> None:
    back = read_profile(written)
    keys = back.kernels.operator_keys
    assert isinstance(keys, ArrowStrings)
    by_model = [k.attribution.operator_key for k in back.kernels.models()]
    assert back.kernels.operator_key_list() == by_model
    assert {op.key for op in back.operators.models()} >= {k for k in by_model if k is not None}
    assert sum(k is None for k in by_model) < len(by_model)


def test_a_key_dictionary_with_a_repeat_or_a_null_is_coded_key_by_key() -> None:
    import numpy as np
    import pyarrow as pa

    from profiler_core.attribution.columns import NONE
    from profiler_core.columnar_profile import _operator_keys

    column = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, None, 3], type=pa.int32()),
                                            pa.array(["a", "b", "a", None]))
    keys, codes = _operator_keys(column)
    assert [None if c == NONE else keys[c] for c in codes.tolist()] == ["a", "b", "a", None, None]
    assert isinstance(keys, list) and codes.dtype == np.int64
    plain = pa.DictionaryArray.from_arrays(pa.array([1, None, 0], type=pa.int32()), pa.array(["x", "y"]))
    keys, codes = _operator_keys(plain)
    assert isinstance(keys, ArrowStrings) and codes.tolist() == [1, NONE, 0] and list(keys) == ["x", "y"]


def test_filled_replaces_nulls_and_leaves_values() -> None:
    import numpy as np
    import pyarrow as pa

    from profiler_core.ingest.arrow_columns import filled

    assert filled(pa.array([1.5, None, 3.0]), np.nan).tolist()[::2] == [1.5, 3.0]
    assert np.isnan(filled(pa.array([1.5, None, 3.0]), np.nan)[1])
    assert filled(pa.chunked_array([[1, None], [7]]), -1).tolist() == [1, -1, 7]
    assert filled(pa.array([4, 5], type=pa.int64()), -1).tolist() == [4, 5]


def _rewritten(profile: Path, kind: str, change: Callable[[Any], Any]) -> None:
    """The ``kind`` table of ``profile`` replaced by ``change(table)``, its size and digest recorded
    in profile.json as a writer would (so only the reference checks can refuse it)."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = _table(profile.parent, kind)
    sink = pa.BufferOutputStream()
    pq.write_table(change(pq.ParquetFile(table).read()), sink)
    data = sink.getvalue().to_pybytes()
    table.write_bytes(data)
    doc = json.loads(profile.read_bytes())
    ref = doc["kernel_table" if kind == "kernels" else "operator_table"]
    ref.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    profile.write_text(json.dumps(doc))


def _keys_replaced(table: Any, column: str, old: str, new: str) -> Any:
    """``table`` with ``old`` written as ``new`` in the string (or dictionary of strings) ``column``."""
    import pyarrow as pa

    col = table.column(column).combine_chunks()
    if pa.types.is_dictionary(col.type):
        values = [new if v == old else v for v in col.dictionary.to_pylist()]
        col = pa.DictionaryArray.from_arrays(col.indices, pa.array(values, type=col.dictionary.type))
    else:
        col = pa.array([new if v == old else v for v in col.to_pylist()], type=col.type)
    return table.set_column(table.column_names.index(column), column, col)


def test_an_operator_without_a_key_is_refused_by_its_position(written: Path, tmp_path: Path) -> None:
    import pyarrow as pa

    profile, _ = _copy(written, tmp_path)
    second = read_profile(profile).operators[1].key

    def nulled(t: Any) -> Any:
        col = t.column("key").combine_chunks()
        keys = [None if v == second else v for v in col.to_pylist()]
        return t.set_column(t.column_names.index("key"), "key", pa.array(keys, type=col.type))

    _rewritten(profile, "operators", nulled)
    with pytest.raises(SchemaError, match="operator 1 has no key; each operator needs its own key"):
        read_profile(profile)


def test_keys_equal_to_the_operator_tables_are_still_checked(written: Path, tmp_path: Path) -> None:
    # the kernels' key dictionary as written is the operator table's key column: reading takes it as
    # it is (no search for repeats, no lookup per key), so a repeat there must still be refused
    profile, _ = _copy(written, tmp_path)
    back = read_profile(profile)
    first, second = back.operators[0].key, back.operators[1].key
    _rewritten(profile, "operators", lambda t: _keys_replaced(t, "key", second, first))
    _rewritten(profile, "kernels", lambda t: _keys_replaced(t, "operator_key", second, first))
    with pytest.raises(SchemaError, match=f"operator key '{first}' appears twice"):
        read_profile(profile)
    # a kernel key the operator table does not hold: the dictionaries differ, each key is looked up
    (tmp_path / "other").mkdir()
    profile, _ = _copy(written, tmp_path / "other")
    used = next(k for k in read_profile(profile).kernels.operator_key_list() if k is not None)
    _rewritten(profile, "kernels", lambda t: _keys_replaced(t, "operator_key", used, "nope#0"))
    with pytest.raises(SchemaError, match="attributed to operator 'nope#0', which the profile does not list"):
        read_profile(profile)


def test_an_operator_key_dictionary_equal_to_the_listed_keys_is_kept_as_arrow() -> None:
    import pyarrow as pa

    from profiler_core.columnar_profile import _operator_keys

    repeat = pa.array(["a", "b", "a"])
    column = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], type=pa.int32()), repeat)
    keys, _ = _operator_keys(column, pa.array(["a", "b", "a"]))
    assert isinstance(keys, ArrowStrings)  # the operator table's keys: their repeat is the reference check's
    keys, codes = _operator_keys(column, pa.array(["a", "b", "c"]))
    assert isinstance(keys, list) and codes.tolist() == [0, 1, 0]  # otherwise searched and coded key by key
