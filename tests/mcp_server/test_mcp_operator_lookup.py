"""get_operator's lookups read a large profile's operator table, not every operator's model.

``find_operator`` reads the key and name columns of a table and builds the operator it finds;
``operator_kernels`` reads the kernels a table holds by position. Both must answer as they do
over the same profile's models: by key, by bare name, an ambiguous name, a missing one.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from mcp_server import views
from mcp_server.views import find_operator, operator_kernels
from tests.attribution.columnar_copy import write_columnar
from tests.conftest import REPO

RUN = REPO / "examples" / "captures" / "h200" / "hf_gpt2_train" / "baseline"


def _profiles(tmp_path: Path) -> tuple:
    from profiler_core.attribution import attribute_run
    from profiler_core.attribution.kernel_table import KernelTable
    from profiler_core.attribution.operator_parquet import OperatorColumns
    from profiler_core.profile_io import read_profile

    models = attribute_run(RUN)
    tables = read_profile(write_columnar(RUN, tmp_path))  # attributed and written as tables at any size
    assert isinstance(tables.operators, OperatorColumns) and isinstance(tables.kernels, KernelTable)
    return models, tables


def _answer(profile: object, wanted: str) -> str:
    try:
        return find_operator(profile, wanted).key  # type: ignore[arg-type]
    except ToolError as error:
        return f"error: {error}"


@pytest.mark.parametrize("many", [False, True], ids=["few keys", "many keys"])
def test_lookups_on_tables_answer_as_on_models(tmp_path: Path, many: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if many:  # the close keys among the calls of close names only
        monkeypatch.setattr(views, "_MANY_KEYS", 10)
    models, tables = _profiles(tmp_path)
    ops = list(models.operators)  # every name here is called more than once (two measured iterations)
    asked = [ops[7].key, ops[-1].key, ops[3].name, ops[3].name.split("::")[-1], "aten::addmm#99999",
             "aten::mmm#3", "nothing_like_it"]
    answers = [_answer(tables, wanted) for wanted in asked]
    assert answers == [_answer(models, wanted) for wanted in asked]
    assert answers[:2] == [ops[7].key, ops[-1].key]
    calls = sorted((op for op in ops if op.name == ops[3].name), key=lambda op: -op.duration_ns)
    listed = ", ".join(op.key for op in calls[:8])
    assert f"names {len(calls)} operator calls ({listed}" in answers[2]
    assert "operator calls" in answers[3] and "did you mean" in answers[5]
    if not many:  # every key compared with the one asked for
        close = difflib.get_close_matches("aten::mmm#3", [op.key for op in ops], n=5, cutoff=0.5)
        assert answers[5].endswith(f"did you mean {', '.join(close)}?")
    for op in ops[::25]:
        got = operator_kernels(tables, tables.operators[ops.index(op)])
        assert [k.id for k in got] == op.kernel_ids
        assert got == operator_kernels(models, op)
