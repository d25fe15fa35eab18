"""A view of a profile read from tables builds an operator's model only when something reads it.

``ProfileView.operators`` is then an :class:`OperatorModels`: blocks of models built when first read
and kept. The rules select operators on the table's columns (``op_mask``, ``op_column``, the class
and counter arrays) and hand a finding its operators by position (``OperatorsAt``), so diagnose
builds the models of a few operators. Every answer must be the one the models give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from profiler_core.analysis.profile_view import OperatorsAt, ProfileView, _combinations
from profiler_core.attribution.operator_parquet import OperatorColumns, OperatorModels
from tests.analysis.goldens import analysed
from tests.attribution.columnar_copy import write_columnar
from tests.conftest import REPO

CAPTURES = REPO / "examples" / "captures" / "h200"
# a training step (phases, optimizer), hand-written attention and projections, a generate() loop,
# convolutions, a compiled step
RUNS = [CAPTURES / "hf_gpt2_train" / "baseline", CAPTURES / "gpt2" / "baseline",
        CAPTURES / "hf_llama_generate" / "baseline", CAPTURES / "tv_resnet18" / "baseline",
        CAPTURES / "hf_bert_train" / "optimized"]
FUSED_KERNELS = {"hf_gpt2_train", "gpt2", "tv_resnet18", "hf_bert_train"}  # kernels naming the ops they fuse
FIELDS = ("name", "phase", "execution_context", "fused_with", "input_shapes", "module_path", "op_class",
          "library", "layer_role", "confidence", "source_nodes", "metric_null_reasons")


def _table_profile(run: Path, folder: Path, shuffled: bool = False) -> Any:
    """The capture's profile written as tables (at any size) and read back; ``shuffled``: its
    operator table's rows then put in another order (every other one reversed), so that an operator's
    position in launch order differs from its position in the list (the engine lists them in launch
    order, so no capture's table does)."""
    from profiler_core.profile_io import read_profile

    profile = read_profile(write_columnar(run, folder))
    assert isinstance(profile.operators, OperatorColumns)
    if shuffled:
        n = len(profile.operators)
        order = [*range(n - 1, -1, -2), *range(n % 2, n - 1, 2)]  # 4 2 0 1 3
        assert sorted(order) == list(range(n))
        profile = profile.model_copy(update={"operators": OperatorColumns(profile.operators.arrow.take(order))})
    return profile


def _models_profile(table_profile: Any) -> Any:
    """The same profile with its operators as a list of models."""
    return table_profile.model_copy(update={"operators": table_profile.operators.models()})


def _blocks_built(models: OperatorModels) -> int:
    return sum(b is not None for b in models._blocks)


@pytest.mark.parametrize("run", RUNS[:2], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lazy_models_are_the_tables_models(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OperatorModels, "BLOCK", 7)
    table = _table_profile(run, tmp_path).operators
    # one model at a time reads its block's metrics off the Arrow columns, not the whole matrix
    singles = [table.model(g) for g in (0, len(table) // 2, len(table) - 1)]
    assert "metrics" not in table.__dict__
    lazy = table.lazy_models()
    assert _blocks_built(lazy) == 0 and not lazy.position_by_id
    assert lazy[len(table) - 1] == table.model(len(table) - 1)
    assert _blocks_built(lazy) == 1 and set(lazy.position_by_id.values()) == set(range(7 * ((len(table) - 1) // 7),
                                                                                     len(table)))
    every = table.models(read_only=True)
    assert list(lazy) == every
    assert singles == [every[0], every[len(table) // 2], every[-1]]
    assert all(lazy[g] is lazy[g] for g in range(len(lazy)))  # one model per position, kept
    assert all(lazy.position_by_id[id(lazy[g])] == g for g in range(len(lazy)))
    for field in FIELDS:  # a coded column: the values the models hold, for every operator
        codes, values = table.codes(field)
        assert [values[c] for c in codes.tolist()] == [getattr(op, field) for op in every], field


@pytest.mark.parametrize("shuffled", [False, True], ids=["listed", "shuffled"])
@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_selections_off_the_columns_equal_those_of_the_models(run: Path, shuffled: bool, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OperatorModels, "BLOCK", 5)
    table_profile = _table_profile(run, tmp_path, shuffled)
    tables, models = ProfileView(table_profile), ProfileView(_models_profile(table_profile))
    assert isinstance(tables.operators, OperatorModels) and not isinstance(models.operators, OperatorModels)
    assert np.array_equal(tables.op_order, models.op_order)
    assert shuffled != np.array_equal(models.op_order, np.arange(len(models.operators)))
    for field in (*FIELDS, "key", "kernel_ids", "duration_ns", "kernel_count", "call_index"):
        assert tables.op_column(field) == models.op_column(field), field
        assert tables.op_column(field, tables.ops_in_order) == models.op_column(field, models.ops_in_order), field
    positions = list(range(0, len(models.operators), 3))
    assert ([op.key for op in tables.operators_in_order_at(positions)]
            == [models.ops_in_order[i].key for i in positions])
    assert ({kid: op.key for kid, op in tables.kernel_operator.items()}
            == {kid: op.key for kid, op in models.kernel_operator.items()})
    assert all((kid in tables.kernel_operator) == (kid in models.kernel_operator)
               for kid in range(-1, len(models.kernels) + 1))
    tests = {"name": lambda n: "mm" in n, "phase": lambda p: p == "forward",
             ("name", "fused_with"): lambda n, f: bool(f) or n.endswith("softmax"),
             ("module_path", "phase", "execution_context"): lambda m, p, c: bool(m) and p != "backward"}
    for fields, test in tests.items():
        want = models.op_mask(fields, test)
        assert np.array_equal(tables.op_mask(fields, test), want), fields
        assert np.array_equal(tables.op_flags(tables.ops_in_order, fields, test), want[models.op_order]), fields
        assert np.array_equal(tables.op_flags(list(tables.operators), fields, test), want), fields  # a list
    assert np.array_equal(tables.op_class_codes, models.op_class_codes)
    assert np.array_equal(tables.op_durations, models.op_durations)
    assert np.array_equal(tables.op_first_starts, models.op_first_starts)
    keys = [op.key for op in models.operators]
    assert tables.op_keys == keys and tables._op_index == models._op_index
    assert all(tables.operators_by_key[k] == models.operators_by_key[k] for k in keys[::3])
    at = tables.operators_of_keys(keys[::-2])
    assert isinstance(at, OperatorsAt) and tables.keys_of(at) == keys[::-2]
    assert [op.key for op in at] == keys[::-2]


@pytest.mark.parametrize("shuffled", [False, True], ids=["listed", "shuffled"])
@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_analysis_of_tables_builds_few_operator_models(run: Path, shuffled: bool, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """diagnose, the summary and the report of the tables equal the models', and the views behind
    them built some of the operator models (a block of one operator): those of the findings, the
    tables and each distinct call's first operator, which is most of a small capture and a few
    percent of a long one (the generate() loop: 16,042 operators)."""
    from profiler_core.analysis.profile_view import shared_views

    monkeypatch.setattr(OperatorModels, "BLOCK", 1)
    table_profile = _table_profile(run, tmp_path, shuffled)
    with shared_views():
        got = analysed(table_profile)
        view = ProfileView.of(table_profile)
        assert isinstance(view.operators, OperatorModels)
        built, blocks = _blocks_built(view.operators), len(view.operators._blocks)
    assert got == analysed(_models_profile(table_profile))
    assert built < blocks, f"{built} of {blocks} operator models built"
    if blocks > 10_000:
        assert built < blocks / 10, f"{built} of {blocks} operator models built"


def test_combinations_number_each_distinct_row() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        sizes = [int(s) for s in rng.integers(1, 6, size=int(rng.integers(1, 4)))]
        n = int(rng.integers(1, 40))
        codes = [rng.integers(0, s, size=n) for s in sizes]
        rows = list(zip(*(c.tolist() for c in codes), strict=True))
        for scale in (1, 1 << 40):  # sizes past one packed key: the rows compared themselves
            combos, inverse = _combinations(codes, [s * scale for s in sizes])
            assert [combos[i] for i in inverse.tolist()] == rows
            assert len(set(combos)) == len(combos) == len(set(rows))


def test_kernel_owners_read_the_owner_rows() -> None:
    from profiler_core.analysis.profile_view import _KernelOwners

    ops = ["op0", "op1", "op2"]
    owners = _KernelOwners(np.array([0, -1, 2, 0]), ops)  # type: ignore[arg-type]
    assert dict(owners) == {0: "op0", 2: "op2", 3: "op0"} and len(owners) == 3
    assert [k in owners for k in (-1, 0, 1, 2, 3, 4, "0")] == [False, True, False, True, True, False, False]
    assert owners.get(1) is None and owners.get(4) is None and owners.get(-1) is None


PAIRS = [(CAPTURES / "gpt2" / "baseline", CAPTURES / "gpt2" / "optimized"),
         (CAPTURES / "hf_gpt2_train" / "baseline", CAPTURES / "hf_gpt2_train" / "optimized"),
         pytest.param(CAPTURES / "hf_llama_generate" / "baseline", CAPTURES / "hf_llama_generate" / "optimized",
                      marks=pytest.mark.slow),  # 20 s: two views of 16k and 9k operators compared in full
         (CAPTURES / "sdpa_attention" / "baseline", CAPTURES / "sdpa_attention" / "optimized"),
         (CAPTURES / "hf_qwen2_decoder" / "baseline", CAPTURES / "hf_qwen2_decoder" / "optimized"),
         (CAPTURES / "tv_resnet18" / "baseline", CAPTURES / "tv_resnet18" / "optimized")]


@pytest.mark.parametrize(("base", "opt"), PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_comparison_of_tables_reads_its_rows_off_the_columns(base: Path, opt: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every operator row, class row and shift check of two profiles read as tables equals the
    comparison of their models, with the rows' operators read by position (no model built for them)."""
    from profiler_core.analysis import compare
    from profiler_core.analysis.profile_view import shared_views

    monkeypatch.setattr(OperatorModels, "BLOCK", 1)
    b_table, o_table = _table_profile(base, tmp_path / "b"), _table_profile(opt, tmp_path / "o")
    with shared_views():
        got = compare(b_table, o_table).model_dump(mode="json")
        views = [ProfileView.of(b_table), ProfileView.of(o_table)]
        built = [_blocks_built(v.operators) for v in views]  # type: ignore[arg-type]
    want = compare(_models_profile(b_table), _models_profile(o_table)).model_dump(mode="json")
    assert got == want
    assert got["operators"] and (got["shift_checks"] or "sdpa" in str(base))
    assert all(b < len(v.operators) for b, v in zip(built, views, strict=True) if len(v.operators) > 100), built



def test_exports_and_phase_sums_of_tables_equal_the_models(tmp_path: Path) -> None:
    """The training view's phase sums, the operator DataFrame and the Perfetto trace read a table's
    operators off its columns or its block-built models; each equals the models'."""
    from profiler_core.report.frames import operator_frame
    from profiler_core.report.perfetto import export_perfetto
    from profiler_core.report.training_view import phase_kernel_ns

    tables = _table_profile(CAPTURES / "hf_gpt2_train" / "baseline", tmp_path)
    models = _models_profile(tables)
    phases = phase_kernel_ns(tables)
    view = ProfileView(models)  # each operator's phase and kernel time, asked one by one
    by_phase: dict[str, int] = {}
    for op in models.operators:
        by_phase[op.phase or "no phase"] = by_phase.get(op.phase or "no phase", 0) + view.op_duration_ns(op)
    assert phases == phase_kernel_ns(models) == {p: by_phase.get(p, 0) for p in phases}
    assert phases["backward"] and phases["optimizer"]
    assert operator_frame(tables).equals(operator_frame(models))
    assert export_perfetto(tables) == export_perfetto(models)


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_view_reads_kernel_names_counters_and_classes_off_the_kernel_table(run: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels' classes by name, every operator's counters (a counter at a time, or all at once)
    and the roofline's kernel names read off the kernel table equal what the kernel models give,
    and diagnose builds the models of a few kernels (those of findings on a few operators)."""
    from profiler_core.analysis import diagnose
    from profiler_core.analysis.profile_view import FIELDS as COUNTERS
    from profiler_core.analysis.roofline import roofline
    from profiler_core.attribution.kernel_table import KernelTable

    table_profile = _table_profile(run, tmp_path)
    assert isinstance(table_profile.kernels, KernelTable)
    models_profile = table_profile.model_copy(update={"kernels": table_profile.kernels.models()})
    tables, models = ProfileView(table_profile), ProfileView(models_profile)
    fused = [tables.fused_with_at(p) for p in range(len(tables.kernels))]
    assert fused == [k.fused_with for k in models.kernels]
    assert any(fused) == (run.parent.name in FUSED_KERNELS)  # Inductor's kernels name the ops they fuse
    assert np.array_equal(tables._name_class_codes, models._name_class_codes)
    assert np.array_equal(tables.work_class_codes, models.work_class_codes)
    alone = {f: tables.op_counter_values(f).tobytes() for f in COUNTERS}
    some = list(tables.operators)[::5]
    rows = [tables.op_counters(op) for op in some]  # each operator's row aggregated alone
    assert "agg" not in tables._op_aggregate.__dict__  # no counter but those read was worked out
    assert rows == [models.op_counters(op) for op in list(models.operators)[::5]]
    whole = ProfileView(table_profile)
    assert whole._op_aggregate.agg is not None  # every counter worked out first
    for f in COUNTERS:
        assert alone[f] == whole.op_counter_values(f).tobytes() == models.op_counter_values(f).tobytes(), f
    assert ([whole.op_counters(op) for op in list(whole.operators)[::7]]
            == [models.op_counters(op) for op in list(models.operators)[::7]])
    from profiler_core.analysis.profile_view import idle_inside_pct
    from profiler_core.report import digest

    assert digest.top_operators(tables, 25) == digest.top_operators(models, 25)
    with pytest.MonkeyPatch.context() as mp:  # the idle share of operators of two kernels or more
        mp.setattr(digest, "_MANY_KERNELS", 2)
        for op, model_op in list(zip(tables.operators, models.operators, strict=True))[::3]:
            got, kernels = digest.tiers_and_idle(tables, tables.kernels_of(op)), list(models.kernels_of(model_op))
            assert got == ({k.attribution.tier.value for k in kernels},
                           idle_inside_pct(kernels) if len(kernels) >= 2 else None), op.key
    assert [tables.op_duration_ns(op) for op in list(tables.operators)[::3]] == [
        models.op_duration_ns(op) for op in list(models.operators)[::3]]
    shared = tables.measured_roofline.operators  # its key index goes through the view's
    assert type(shared.key_index) is not dict
    assert dict(shared.key_index) == {shared.key(j): j for j in range(len(shared))}
    assert shared.key_index.get("no such key#0") is None and "no such key#0" not in shared.key_index
    got = roofline(table_profile, kernels=tables.kernels, operators=tables.operators)
    want = roofline(table_profile, kernels=models.kernels, operators=models.operators)
    assert list(got.operators) == list(want.operators) and got.classes == want.classes
    # the class totals off the operator table's class codes, numbered by each class's first row,
    # as a plain list of the operators' models gives them
    plain = roofline(table_profile, kernels=models.kernels, operators=list(models.operators))
    assert got.classes == plain.classes
    numbers, values = got.operators._class_codes(got.operators._at_op)
    assert values == list(dict.fromkeys(r.op_class for r in got.operators))
    assert [values[c] for c in numbers.tolist()] == [r.op_class for r in got.operators]
    from profiler_core.analysis.profile_view import shared_views
    from profiler_core.attribution.kernel_table import KernelModels

    monkeypatch.setattr(KernelTable, "MODEL_BLOCK", 1)
    with shared_views():
        diagnose(table_profile)
        kernels = ProfileView.of(table_profile).kernels
    assert isinstance(kernels, KernelModels)
    built = sum(b is not None for b in kernels._blocks)
    if len(kernels) > 500:  # a few hundred kernels: ResNet-18's layout rule reads 82 of its 136
        assert built < len(kernels) / 10, f"{built} of {len(kernels)} kernel models built"
