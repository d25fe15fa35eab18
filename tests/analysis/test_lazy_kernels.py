"""A view over a columnar profile builds kernel models only where it is asked for them, and what it
reads off the columns instead is what the models say.

The profile is the shipped GPT-2 capture written columnar and read back; its columns are then
varied (overlapping kernels, registers and counters missing or 0, counterless kernels) so that
every branch of the column reading differs from a careless one.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler_core.analysis.profile_view import KernelsAt, ProfileView, busy_and_span_ns
from profiler_core.attribution.columns import NONE
from profiler_core.attribution.kernel_table import SOURCES, KernelModels, KernelTable
from profiler_core.schema import CounterSource, Profile

REPO = Path(__file__).resolve().parents[2]


@cache
def _table_profile() -> Profile:
    import tempfile

    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import read_profile, write_profile

    folder = Path(tempfile.mkdtemp(prefix="oprof-lazy-"))
    mp = pytest.MonkeyPatch()
    mp.setenv("OPROF_COLUMNAR_KERNELS", "0")
    try:
        write_profile(folder / "profile.json", attribute_run(REPO / "examples/captures/h200/gpt2/baseline"))
    finally:
        mp.undo()
    profile = read_profile(folder / "profile.json")
    assert isinstance(profile.kernels, KernelTable)
    return profile


def _with_table(**columns: object) -> ProfileView:
    profile = _table_profile()
    table = replace(profile.kernels, **columns)  # type: ignore[arg-type]
    return ProfileView(profile.model_copy(update={"kernels": table}))


def test_models_are_built_a_block_at_a_time_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KernelTable, "MODEL_BLOCK", 64)
    monkeypatch.setattr(KernelModels, "LOCAL_BLOCKS", 3)  # three blocks on their own rows, then every row
    table = _table_profile().kernels
    assert isinstance(table, KernelTable) and len(table) > 2 * table.MODEL_BLOCK
    lazy = table.lazy_models()
    assert lazy.built == 0
    k = lazy[table.MODEL_BLOCK + 3]
    assert lazy.built == table.MODEL_BLOCK  # only that kernel's block
    assert lazy[table.MODEL_BLOCK + 3] is k and lazy[-len(table) + table.MODEL_BLOCK + 3] is k
    assert lazy[table.MODEL_BLOCK + 1:table.MODEL_BLOCK + 5][2] is k
    assert [m.model_dump() for m in lazy] == [m.model_dump() for m in table.models()]
    assert lazy.built == len(table) and list(lazy)[table.MODEL_BLOCK + 3] is k  # iterating keeps the built ones
    with pytest.raises(IndexError):
        lazy[len(table)]


def test_a_view_of_a_table_builds_no_model_for_its_columns() -> None:
    view = ProfileView(_table_profile())
    assert isinstance(view.kernels, KernelModels)
    assert view.total_ns == sum(k.duration_ns for k in view.kernels.table.models())
    assert view.kernels.built == 0
    at = np.array([5, 400, 3, 5], dtype=np.int64)
    some = KernelsAt(view.kernels, at)
    assert view.positions(some) is at and len(some) == 4 and view.kernels.built == 0
    assert view.names_in(some) == [k.name for k in some] and some[1:3] == [view.kernels[400], view.kernels[3]]
    assert view.first_start_ns(some) == view.kernels[5].start_ns
    assert list(some) == [view.kernels[int(p)] for p in at]
    assert view.positions(list(some)).tolist() == at.tolist()  # the very models, found back one by one


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_busy_time_read_off_the_columns_is_the_merged_intervals_of_the_models(data: st.DataObject) -> None:
    n = len(_table_profile().kernels)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    spread = data.draw(st.sampled_from([10, 1_000, 100_000]))
    start = np.array([rng.randrange(spread * 10) for _ in range(n)], dtype=np.int64)
    end = start + np.array([rng.randrange(spread) for _ in range(n)], dtype=np.int64)
    view = _with_table(start_ns=start, end_ns=end)
    at = np.array(sorted(rng.sample(range(n), data.draw(st.integers(0, 60)))), dtype=np.int64)
    rng.shuffle(at)  # in any order
    assert view.busy_and_span_at(at) == busy_and_span_ns([view.kernels[p] for p in at.tolist()])
    assert view.busy_and_span_at(np.arange(n)) == busy_and_span_ns(view.kernels)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_most_registers_read_off_the_columns_is_what_the_models_say(data: st.DataObject) -> None:
    table = _table_profile().kernels
    assert isinstance(table, KernelTable)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    field = table.counter_fields.index("registers_per_thread")
    values = table.counter_values.copy()
    values[:, field] = [rng.choice([0.0, np.nan, 32.0, 96.0, 168.0]) for _ in range(len(values))]
    launch = np.array([rng.choice([NONE, 0, 40, 255]) for _ in range(len(table))], dtype=np.int64)
    rows = table.counter_row.copy()
    rows[[rng.randrange(len(rows)) for _ in range(20)]] = NONE
    view = _with_table(counter_values=values, registers_per_thread=launch, counter_row=rows)
    for _ in range(5):
        at = np.array(rng.sample(range(len(table)), data.draw(st.integers(0, 12))), dtype=np.int64)
        some = KernelsAt(view.kernels, at)
        assert view.max_registers(some) == view.max_registers(list(some))  # columns, then the models' path
    no_counters = _with_table(have_counters=False, registers_per_thread=launch)
    some = KernelsAt(no_counters.kernels, np.arange(40, dtype=np.int64))
    assert no_counters.max_registers(some) == no_counters.max_registers(list(some))


def test_counterless_kernels_read_off_the_columns_are_those_the_models_say() -> None:
    table = _table_profile().kernels
    assert isinstance(table, KernelTable)
    rng = random.Random(7)
    source = np.array([rng.randrange(len(SOURCES)) for _ in range(len(table))], dtype=table.counter_source.dtype)
    for view in (_with_table(counter_source=source), _with_table(counter_source=source, have_counters=False)):
        by_models = [k.counter_source is CounterSource.MISSING or not k.counters for k in view.kernels]
        assert view.counterless_mask.tolist() == by_models
        assert 0 < sum(by_models)


def test_gemm_time_read_off_the_columns_is_what_each_kernels_name_says() -> None:
    from profiler_core.schema import OperatorClass

    view = ProfileView(_table_profile())
    by_models = sum(k.duration_ns for k in view.kernels.table.models()
                    if view.kernel_name_class(k) is OperatorClass.GEMM)
    assert view.gemm_kernel_ns() == by_models > 0
    some = view.kernels_of_ops(view.ops_in_order[:200])
    assert isinstance(some, KernelsAt)
    assert view.gemm_kernel_ns(some) == sum(k.duration_ns for k in list(some)
                                            if view.kernel_name_class(k) is OperatorClass.GEMM)


def test_compares_kernel_tally_is_the_tally_of_the_models() -> None:
    from profiler_core.analysis.compare import _name_tally, kernel_identity

    profile = _table_profile()
    table = profile.kernels
    assert isinstance(table, KernelTable)
    # two more names the comparison counts as one: a memset under both of its spellings
    from profiler_core.attribution.columns import Interner

    strings = Interner()
    for text in table.strings.values:
        strings.code(text)
    memsets = [strings.code("Memset (Device)"), strings.code("Memset (Unknown)")]
    names = table.name.copy()
    names[[3, 90, 91, 400]] = [memsets[1], memsets[0], memsets[1], memsets[0]]
    view = _with_table(name=names, strings=strings)
    count, dur, first = Counter[str](), Counter[str](), {}
    for p, k in enumerate(view.kernels):
        ident = kernel_identity(k.name)
        count[ident] += 1
        dur[ident] += k.duration_ns
        first.setdefault(ident, p)
    got = _name_tally(view)
    assert list(got[0].items()) == list(count.items()) and got[1] == dict(dur) and got[2] == first
    assert count["Memset"] >= 4


def test_a_tables_kernel_operators_are_those_its_operators_list_then_its_attributions_name() -> None:
    profile = _table_profile()
    table = profile.kernels
    assert isinstance(table, KernelTable)
    # a kernel no operator lists, owned through its attribution's operator key
    ops = list(profile.operators)
    listed = ops[3].kernel_ids
    ops[3] = ops[3].model_copy(update={"kernel_ids": listed[1:]})
    view = ProfileView(profile.model_copy(update={"operators": ops}))
    expected: dict[int, object] = {}
    for op in view.operators:
        for kid in op.kernel_ids:
            expected[kid] = op
    for k in view.kernels.table.models():
        if k.id not in expected and k.attribution.operator_key in view.operators_by_key:
            expected[k.id] = view.operators_by_key[k.attribution.operator_key]
    got = view.kernel_operator
    assert got.keys() == expected.keys() and all(got[i] is expected[i] for i in got)
    assert got[listed[0]] is ops[3]


def test_gemm_signatures_read_at_once_are_each_operators_own() -> None:
    """One pass works the shapes part out once per name and shapes list: operators read from tables
    share a shapes list, and an addmm and an mm sharing one must still read their own pair of it."""
    from profiler_core.analysis.patterns import gemm_signature, gemm_signatures
    from profiler_core.schema import Operator

    view = ProfileView(_table_profile())
    ops = list(view.ops_in_order)
    gemms = [op for op in ops if op.name in ("aten::mm", "aten::addmm")]
    assert len({id(op.input_shapes) for op in gemms}) < len(gemms)  # shapes lists are shared
    shared = [[512, 768], [768, 768], [768, 3072]]
    ops += [Operator.model_construct(key=f"{name}#x", name=name, call_index=99, input_shapes=shared,
                                     kernel_ids=gemms[0].kernel_ids) for name in ("aten::addmm", "aten::mm")]
    assert ops[-1].input_shapes is ops[-2].input_shapes
    view._work_class.update({op.key: view.work_class(gemms[0]) for op in ops[-2:]})
    sigs = gemm_signatures(view, ops)
    assert sigs == [gemm_signature(view, op) for op in ops]
    assert sigs[-2] == ("shapes", (768, 768), (768, 3072)) and sigs[-1] == ("shapes", (512, 768), (768, 768))
    assert gemm_signatures(view, ops) is sigs  # once per view and list
