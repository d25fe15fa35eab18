"""Invocation-order counter join: full, per-config and prefix runs; divergences are named."""

from __future__ import annotations

import pytest

from profiler_core.attribution.counter_join import join_counters
from profiler_core.errors import DeterminismError
from profiler_core.records import CounterRow, TimelineKernel
from profiler_core.schema import CounterSource


def _k(name: str, grid=(8, 1, 1), block=(128, 1, 1), t=0) -> TimelineKernel:
    return TimelineKernel(name=name, start_ns=t, end_ns=t + 10, stream=7, device=0, grid=grid, block=block)


def _r(i: int, name: str, grid=(8, 1, 1), block=(128, 1, 1), v=1.0) -> CounterRow:
    return CounterRow(ncu_id=i, name=name, grid=grid, block=block, stream=7, device=0,
                      metrics={"sm__cycles_active.sum": v})


SEQ = ["ln", "mm", "add", "mm", "relu", "mm"]


def test_full_join_pairs_ith_launch_with_ith_row() -> None:
    kernels = [_k(n, t=i) for i, n in enumerate(SEQ)]
    rows = [_r(i, n, v=float(i)) for i, n in enumerate(SEQ)]
    j = join_counters(kernels, rows)
    assert j.mode == "full"
    assert j.row_index == list(range(6))
    assert set(j.source) == {CounterSource.MEASURED}


def test_full_join_survives_interleaving_across_names() -> None:
    # ncu serialised two independent launches in the other order: per-name order still joins
    kernels = [_k("a"), _k("b"), _k("a")]
    rows = [_r(0, "b"), _r(1, "a"), _r(2, "a")]
    j = join_counters(kernels, rows)
    assert j.row_index == [1, 0, 2]


def test_grid_mismatch_is_a_determinism_error_naming_the_launch() -> None:
    kernels = [_k("mm"), _k("mm", grid=(16, 1, 1))]
    rows = [_r(0, "mm"), _r(1, "mm", grid=(32, 1, 1))]
    with pytest.raises(DeterminismError, match=r"2nd launch of 'mm'.*\(16, 1, 1\).*\(32, 1, 1\)"):
        join_counters(kernels, rows)


def test_grid_mismatch_with_allow_partial_leaves_a_hole() -> None:
    kernels = [_k("mm"), _k("mm", grid=(16, 1, 1))]
    rows = [_r(0, "mm"), _r(1, "mm", grid=(32, 1, 1))]
    j = join_counters(kernels, rows, allow_partial=True)
    assert j.source == [CounterSource.MEASURED, CounterSource.MISSING]
    assert "grid/block differ" in j.holes[1]


def test_count_mismatch_names_first_divergence() -> None:
    kernels = [_k(n) for n in ["ln", "mm", "relu"]]
    rows = [_r(0, "ln"), _r(1, "gemv"), _r(2, "relu")]
    with pytest.raises(DeterminismError, match=r"launch #1.*'mm'.*'gemv'"):
        join_counters(kernels, rows)


def test_per_config_rows_are_inherited_by_later_launches() -> None:
    kernels = [_k("mm"), _k("mm", grid=(4, 1, 1)), _k("mm"), _k("add"), _k("mm")]
    rows = [_r(10, "mm", v=5.0), _r(11, "mm", grid=(4, 1, 1)), _r(12, "add")]
    j = join_counters(kernels, rows)
    assert j.mode == "per-config"
    assert j.source == [CounterSource.MEASURED, CounterSource.MEASURED, CounterSource.INHERITED,
                        CounterSource.MEASURED, CounterSource.INHERITED]
    assert j.row_index == [0, 1, 0, 2, 0]
    assert j.inherited_from[2] == 0 and j.inherited_from[4] == 0


def test_per_config_spot_check_reports_spread() -> None:
    kernels = [_k("mm") for _ in range(4)]
    rows = [_r(0, "mm", v=100.0), _r(1, "mm", v=110.0)]
    j = join_counters(kernels, rows)
    assert j.source[:2] == [CounterSource.MEASURED] * 2
    (spread,) = j.spread.values()
    assert spread["sm__cycles_active.sum"] == pytest.approx(0.10)


def test_per_config_missing_configuration_fails() -> None:
    kernels = [_k("mm"), _k("relu")]
    with pytest.raises(DeterminismError, match="relu"):
        join_counters(kernels, [_r(0, "mm")] + [])


def test_prefix_run_inherits_by_position() -> None:
    one_iter = ["ln", "mm", "mm", "add"]
    kernels = [_k(n) for n in one_iter * 3]
    rows = [_r(i, n) for i, n in enumerate(one_iter)]
    j = join_counters(kernels, rows)
    assert j.mode == "prefix"
    assert j.row_index == [0, 1, 2, 3] * 3
    assert j.inherited_from[5] == 1
    assert j.source.count(CounterSource.INHERITED) == 8


def test_no_rows_means_every_launch_missing() -> None:
    j = join_counters([_k("a")], [])
    assert j.mode == "none" and j.source == [CounterSource.MISSING]


def test_names_spelled_differently_still_join() -> None:
    kernels = [_k("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T)")]
    rows = [_r(0, "void at::vectorized_elementwise_kernel<4, at::FillFunctor<float>>")]
    j = join_counters(kernels, rows)
    assert j.row_index == [0]


def test_per_config_sampling_of_another_instantiation_is_an_explained_hole() -> None:
    # ncu's per-launch-config filter keys on the function: two instantiations, one sample
    a = "void at::elementwise_kernel<128, 2, add_functor>(int)"
    b = "void at::elementwise_kernel<128, 2, copy_functor>(int)"
    kernels = [_k(b), _k(a), _k(b), _k("mm")]
    rows = [_r(0, b), _r(1, "mm")]
    j = join_counters(kernels, rows)
    assert j.mode == "per-config"
    assert j.source == [CounterSource.MEASURED, CounterSource.MISSING, CounterSource.INHERITED, CounterSource.MEASURED]
    assert "another instantiation" in j.holes[1]


def test_two_instantiations_under_one_bare_name_keep_their_own_rows() -> None:
    # The graphed MoE (H200): CUPTI left CUTLASS's grouped GEMM mangled, so the counter run joins on bare
    # identifiers, under which the router's kernelHistogram1D<int, ...> (replayed in the graph) and the aux
    # loss's kernelHistogram1D<long, ...> (eager) share one grid and block. Each launch gets its own
    # instantiation's row, never the other's (whose NVTX stack named another operator)
    from pathlib import Path

    from profiler_core.attribution.names import template_arguments
    from profiler_core.ingest import read_kineto, read_ncu

    run = Path(__file__).resolve().parents[2] / "examples/captures/h200/hf_mixtral_moe_grouped/optimized"
    kernels = sorted((k for k in read_kineto(run / "kineto.json.gz").kernels if k.kind == "kernel"),
                     key=lambda k: (k.correlation_id, k.start_ns))
    rows = read_ncu(run / "counters.csv").rows
    join = join_counters(kernels, rows)
    assert join.mode == "per-config" and join.name_key == "base_name"
    hist = [j for j, k in enumerate(kernels) if "kernelHistogram1D" in k.name]
    assert len(hist) == 16
    for j in hist:
        row = rows[join.row_index[j]]  # type: ignore[index]
        assert template_arguments(row.name) == template_arguments(kernels[j].name), j
    first_long = next(j for j in hist if template_arguments(kernels[j].name)[0] == "long")
    assert join.source[first_long] is CounterSource.MEASURED
    # every measured launch of the capture carries a row of its own instantiation
    for j, i in enumerate(join.row_index):
        if i is not None and template_arguments(rows[i].name) and template_arguments(kernels[j].name):
            assert template_arguments(rows[i].name) == template_arguments(kernels[j].name), kernels[j].name
