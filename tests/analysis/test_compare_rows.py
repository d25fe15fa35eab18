"""A comparison's operator rows kept as columns: a row's model is built when read, the largest
changes are picked off the time column, and the rows serialise as the list they stand for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from profiler_core.analysis.compare import Comparison, OperatorRows, _RowColumns
from tests.analysis.test_lazy_operators import CAPTURES, _table_profile

# real pairs: a compiled GPT-2 (renamed and fused groups), a training step, a decoder with a cache
PAIRS = ["gpt2", "hf_gpt2_train", "hf_qwen2_decoder"]


def _compared(name: str, tmp_path: Path, **capture: Any) -> Comparison:
    from profiler_core.analysis import compare

    base = _table_profile(CAPTURES / name / "baseline", tmp_path / "b")
    opt = _table_profile(CAPTURES / name / "optimized", tmp_path / "o")
    if capture:
        opt = opt.model_copy(update={"capture": opt.capture.model_copy(update=capture)})
    return compare(base, opt)


def _oracle(rows: list[Any], k: int | None) -> list[Any]:
    return sorted(rows, key=lambda r: -abs(r.delta_ns))[:k]


@pytest.mark.parametrize("name", PAIRS)
def test_the_largest_changes_are_the_sorted_rows(name: str, tmp_path: Path) -> None:
    """``largest_changes(k)`` equals sorting every row by |delta| (row order on ties), for every k,
    with each side's time taken per iteration when the iteration counts differ."""
    c = _compared(name, tmp_path)
    assert c.operators._columns is not None  # two table profiles: the rows stay columns
    scaled = _compared(name, tmp_path / "scaled", measured_iterations=7)
    assert scaled.per_iteration
    for comparison in (c, scaled):
        rows = list(comparison.operators)
        deltas = [r.delta_ns for r in rows]
        assert comparison.operators.delta_ns().tolist() == deltas
        assert len({abs(d) for d in deltas}) < len(deltas)  # ties: the order among them is checked too
        for k in (0, 1, 3, 10, len(rows) - 1, len(rows), len(rows) + 5, None):
            assert comparison.operators.largest_changes(k) == _oracle(rows, k), k
    assert [r.base_ns for r in scaled.operators] != [r.base_ns for r in c.operators]


def test_rows_index_slice_and_compare_as_the_list(tmp_path: Path) -> None:
    c = _compared("gpt2", tmp_path)
    rows = c.operators
    models = list(rows)
    assert len(rows) == len(models) > 10
    assert rows[0] == models[0] and rows[-1] == models[-1] and rows[-len(models)] == models[0]
    assert rows[2:9:3] == models[2:9:3] and rows[::-1] == models[::-1]
    for bad in (len(models), -len(models) - 1):
        with pytest.raises(IndexError):
            rows[bad]
    assert rows == models and rows == OperatorRows(models) and rows != models[:-1]
    assert OperatorRows(models).largest_changes(5) == rows.largest_changes(5)


def test_rows_serialise_as_the_list_and_read_back(tmp_path: Path) -> None:
    """JSON and ``model_dump`` write every row, as a list of rows would; reading the JSON back gives
    a comparison whose rows equal these."""
    c = _compared("hf_gpt2_train", tmp_path)
    dumped = c.model_dump(mode="json")
    assert dumped["operators"] == [r.model_dump(mode="json") for r in c.operators]
    back = Comparison.model_validate_json(c.model_dump_json())
    assert isinstance(back.operators, OperatorRows) and back.operators._columns is None
    assert back.operators == c.operators and back == c
    assert Comparison.model_validate(c.model_dump()).operators == c.operators
    with pytest.raises(ValueError, match="operators"):
        Comparison.model_validate({**dumped, "operators": [{"label": "x"}]})


def test_reports_build_only_the_rows_they_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal, Markdown and HTML reports and the MCP tool's answer build the models of the
    rows they list, not one per aligned group."""
    from mcp_server.tools.analysis import comparison_result
    from profiler_core.report.html import comparison_html
    from profiler_core.report.markdown import comparison_markdown
    from profiler_core.report.terminal import comparison_renderables

    c = _compared("hf_qwen2_decoder", tmp_path)
    assert len(c.operators) > 100
    built: list[int] = []
    row = _RowColumns.row
    monkeypatch.setattr(_RowColumns, "row", lambda self, i: (built.append(i), row(self, i))[1])
    for top_k, render in ((10, lambda: comparison_renderables(c, top_k=10)),
                          (7, lambda: comparison_markdown(c, top_k=7)),
                          (15, lambda: comparison_html(c, top_k=15)),
                          (4, lambda: comparison_result(c, baseline=tmp_path, optimized=tmp_path,
                                                        out=tmp_path / "c.json", top_k=4))):
        built.clear()
        out = render()
        assert 0 < len(built) <= top_k, (top_k, len(built))
    assert [r.label for r in out.operators] == [r.label for r in c.operators.largest_changes(4)]


@pytest.mark.parametrize("name", ["gpt2", "hf_gpt2_train", "tv_resnet18"])
def test_shift_checks_by_position_are_the_checks_by_key(name: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each finding's optimized operators read by launch position through the alignment give the
    shift checks of looking every key up (the path of profiles whose keys repeat)."""
    from profiler_core.analysis import align_operators, diagnose
    from profiler_core.analysis.compare import _shift_checks
    from profiler_core.analysis.profile_view import ProfileView
    from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS as T

    base = _table_profile(CAPTURES / name / "baseline", tmp_path / "b")
    opt = _table_profile(CAPTURES / name / "optimized", tmp_path / "o")
    findings = diagnose(base)
    bv, ov = ProfileView(base), ProfileView(opt)
    alignment = align_operators(bv, ov)
    by_position = _shift_checks(findings, alignment, bv, ov, T)
    assert any(c.opt is not None for c in by_position)
    monkeypatch.setattr(ProfileView, "keys_repeat", property(lambda self: True))
    assert _shift_checks(findings, alignment, bv, ov, T) == by_position


@pytest.mark.parametrize("name", ["gpt2", "hf_qwen2_decoder"])
def test_the_json_document_is_the_dump_of_the_comparison(name: str, tmp_path: Path) -> None:
    """``compare --json`` writes the comparison's fields straight to JSON, its rows a batch at a time:
    the very bytes of its ``model_dump(mode="json")`` written as a document; the MCP tool's file is
    ``model_dump_json``'s bytes."""
    from mcp_server.tools.analysis import write_comparison
    from profiler_core.analysis.compare import comparison_json_fields as json_fields
    from profiler_core.json_output import json_document, json_pieces

    c = _compared(name, tmp_path)
    extra = {"end_to_end": {"verdict": "faster"}}
    want = json_document({**c.model_dump(mode="json"), **extra})
    for batch in (1, 7, 100_000):  # the rows written a batch at a time
        assert b"".join(json_pieces({**json_fields(c), **extra}, "operators", c.operators, batch)) == want
    # the MCP tool's comparison.json: the bytes of model_dump_json(indent=1), no final newline
    write_comparison(tmp_path / "comparison.json", c)
    assert (tmp_path / "comparison.json").read_bytes() == c.model_dump_json(indent=1).encode()
