"""The roofline's selections read off its columns equal the same selections over its built rows.

``roofline()`` builds an operator's row only when it is read; the far-below rule, the report's
most-headroom tables, the class totals and the by-key lookup read columns of the same figures.
Here each is checked against the rows themselves: on every shipped H200 capture, and on made-up
times and floors around the boundaries (headroom exactly 0, a floor above the time, unknown floors).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler_core.analysis.roofline import (
    FAR_BELOW,
    ClassRoofline,
    OperatorRoofline,
    PlotPoints,
    Roofline,
    RooflineRows,
    _Work,
    roofline,
)
from profiler_core.schema import Operator, OperatorClass
from tests.analysis.goldens import RUNS, run_id
from tests.conftest import REPO

GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"
GPT2_TRAIN = REPO / "examples" / "captures" / "h200" / "hf_gpt2_train" / "baseline"  # headroom 0 among its rows


def _sum_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


def classes_of_rows(rows: Sequence[OperatorRoofline]) -> list[ClassRoofline]:
    """The class totals worked out row by row (the oracle)."""
    grouped: dict[str, list[OperatorRoofline]] = defaultdict(list)
    for r in rows:
        grouped[r.op_class].append(r)
    out = []
    for op_class, members in grouped.items():
        t_ns = sum(r.duration_ns for r in members)
        flops = _sum_or_none([r.flops for r in members])
        dram = _sum_or_none([r.dram_bytes for r in members])
        seconds = t_ns * 1e-9
        out.append(ClassRoofline(
            op_class=op_class, operators=len(members), duration_ns=t_ns, flops=flops, dram_bytes=dram,
            arithmetic_intensity=flops / dram if flops is not None and dram else None,
            achieved_flops_per_s=flops / seconds if flops is not None and seconds else None,
            achieved_bytes_per_s=dram / seconds if dram is not None and seconds else None,
            roofline_time_ns=_sum_or_none([r.roofline_time_ns for r in members]),
            headroom_ns=_sum_or_none([r.headroom_ns for r in members])))
    out.sort(key=lambda c: -c.duration_ns)
    return out


def _bits(values: Sequence[float | None]) -> list[str]:
    """Values as text: 0.0 and -0.0 apart, None apart from 0."""
    return [repr(v) for v in values]


def check_columns_against_rows(roof: Roofline) -> None:
    rows_seq = roof.operators
    assert isinstance(rows_seq, RooflineRows)
    rows = list(rows_seq)
    plain = Roofline(chip=roof.chip, measured_roofs=roof.measured_roofs, operators=rows)  # read row by row
    everything = list(range(len(rows)))
    want_far = [j for j, r in enumerate(rows) if r.far_below_roofs and r.dram_bytes]
    assert roof.far_below() == want_far == plain.far_below()
    assert _bits(roof.headroom_at(everything)) == _bits([r.headroom_ns for r in rows])
    assert roof.keys_at(want_far) == [rows[j].key for j in want_far] == plain.keys_at(want_far)
    for k in (1, 3, 8, len(rows) + 1):
        want = sorted((r for r in rows if r.headroom_ns), key=lambda r: -(r.headroom_ns or 0))[:k]
        assert roof.most_headroom(k, with_headroom=True) == want == plain.most_headroom(k, with_headroom=True)
        want_all = sorted(rows, key=lambda r: -(r.headroom_ns or 0))[:k]
        assert roof.most_headroom(k) == want_all == plain.most_headroom(k)
        want_far_k = sorted((rows[j] for j in want_far), key=lambda r: -(r.headroom_ns or 0))[:k]
        assert roof.most_headroom(k, want_far) == want_far_k == plain.most_headroom(k, want_far)
    assert [repr(c) for c in roof.classes] == [repr(c) for c in classes_of_rows(rows)]
    placed = [r for r in rows if r.flops and r.dram_bytes and r.duration_ns > 0]
    want_points = PlotPoints(op_class=[r.op_class for r in placed], intensity=[r.arithmetic_intensity for r in placed],
                             achieved=[r.achieved_flops_per_s for r in placed],
                             duration_ns=[r.duration_ns for r in placed])
    assert repr(roof.plot_points()) == repr(want_points) == repr(plain.plot_points())
    by_key = roof.by_key()
    want_by_key = {r.key: r for r in rows}
    assert list(by_key) == list(want_by_key) and all(by_key[k] is want_by_key[k] for k in want_by_key)
    assert "no such key" not in by_key and by_key.get("no such key") is None
    asked = [*want_by_key, "no such key"]
    want_figures = [(r.duration_ns, r.flops, r.dram_bytes, r.roofline_time_ns) if (r := want_by_key.get(k)) else None
                    for k in asked]
    for peak, bandwidth, scale in ((67e12, 4.8e12, 1.0), (790e12, 4.0e12, 0.5), (1e3, 1e3, 2.0)):
        got_terms = roof.time_above_floor(asked, peak, bandwidth, scale)
        assert repr(got_terms) == repr(plain.time_above_floor(asked, peak, bandwidth, scale))
        assert len(got_terms[0]) == len(want_by_key)
    got = [None if f is None else tuple(f) for f in roof.figures_of(asked)]
    got_plain = [None if f is None else tuple(f) for f in plain.figures_of(asked)]
    assert repr(got) == repr(want_figures) == repr(got_plain)


@cache
def _profile(run: Path):  # type: ignore[no-untyped-def]
    from profiler_core.attribution import attribute_run

    return attribute_run(run)


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=run_id)
def test_every_shipped_capture_selects_on_columns_what_its_rows_give(run: Path) -> None:
    profile = _profile(run)
    for measured in (False, True):
        check_columns_against_rows(roofline(profile, measured_roofs=measured))


def test_the_gpt2_training_capture_selects_on_columns_what_its_rows_give() -> None:
    roof = roofline(_profile(GPT2_TRAIN), measured_roofs=True)
    assert roof.far_below() and roof.classes and 0.0 in roof.headroom_at(range(len(roof.operators)))
    check_columns_against_rows(roof)


def test_rows_are_built_when_read_and_then_kept() -> None:
    roof = roofline(_profile(GPT2))
    rows = roof.operators
    assert isinstance(rows, RooflineRows)
    roof.far_below(), roof.classes, roof.headroom_at([0, 1])
    assert rows._rows.count(None) == len(rows)  # the selections built no row
    top = roof.most_headroom(2)
    assert len(rows) - rows._rows.count(None) == 2
    assert roof.most_headroom(2)[0] is top[0] is rows[rows._rows.index(top[0])]


_CLASSES = [OperatorClass.GEMM, OperatorClass.ELEMENTWISE, OperatorClass.ATTENTION]
_maybe_float = st.one_of(st.none(), st.just(float("nan")),
                         st.floats(allow_nan=False, allow_infinity=False, min_value=-1.0, max_value=1e6))


@st.composite
def _made_up(draw: st.DrawFn) -> tuple[list[Operator], list[_Work], list[int]]:
    n_works = draw(st.integers(1, 6))
    edge = draw(st.integers(1, 10**6))  # a time whose floor sits exactly at FAR_BELOW of it (for some)
    works = []
    for _ in range(n_works):
        t_roof = draw(st.one_of(st.none(), st.just(0.0), st.floats(0.0, 2e-4, allow_nan=False),
                                st.just(FAR_BELOW * (edge * 1e-9))))
        dram = draw(st.one_of(st.none(), st.just(0.0), st.just(-0.0), st.just(float("nan")), st.floats(0.0, 1e9)))
        works.append(_Work(flops=draw(_maybe_float), source=None, flops_measured=None, flops_modelled=None,
                           formula=None, by_roof={}, dram=dram, dominant=None, intensity=None, t_roof=t_roof,
                           bound=None, disagreement=None, notes=()))
    n = draw(st.integers(1, 30))
    ops, of_work = [], []
    for g in range(n):
        w = draw(st.integers(0, n_works - 1))
        t_roof = works[w].t_roof
        # times around the floor: exactly it (headroom 0), just under, just over, far over
        if t_roof and draw(st.booleans()):
            duration = max(1, round(t_roof * 1e9) + draw(st.integers(-2, 2)))
        elif draw(st.booleans()):
            duration = edge
        else:
            duration = draw(st.integers(1, 10**6))
        ops.append(Operator(key=f"op#{g % max(1, n - 2)}", name="op", call_index=g, duration_ns=duration,
                            op_class=draw(st.sampled_from(_CLASSES))))
        of_work.append(w)
    return ops, works, of_work


@settings(max_examples=300, deadline=None)
@given(_made_up())
def test_made_up_floors_and_times_select_on_columns_what_the_rows_give(
        case: tuple[list[Operator], list[_Work], list[int]]) -> None:
    ops, works, of_work = case
    rows = RooflineRows(ops, np.arange(len(ops), dtype=np.int64), np.array(of_work, dtype=np.int64), works)
    check_columns_against_rows(Roofline(chip=None, measured_roofs=False, operators=rows, classes=rows.classes()))
