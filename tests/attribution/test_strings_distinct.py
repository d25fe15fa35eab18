"""A key column is distinct when it holds no null and no value twice; a view of a profile read from
tables takes that off the column instead of indexing every key."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from profiler_core.attribution.operator_parquet import OperatorModels, strings_distinct

GPT2_RUN = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.mark.parametrize(("array", "distinct"), [
    (pa.array(["a#0", "b#0", "a#1"]), True),
    (pa.array(["a#0", "b#0", "a#0"]), False),
    (pa.array(["a#0", None, "b#0"]), False),  # a null is no key
    (pa.chunked_array([pa.array(["a#0", "b#0"]), pa.array(["c#0"])]), True),
    (pa.chunked_array([pa.array(["a#0", "b#0"]), pa.array(["b#0"])]), False),  # repeated across chunks
    (pa.array([], type=pa.string()), True),
])
def test_strings_distinct(array: object, distinct: bool) -> None:
    assert strings_distinct(array) is distinct


def test_a_table_view_answers_repeats_without_a_key_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.analysis.profile_view import ProfileView
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import read_profile, write_profile

    monkeypatch.setenv("OPROF_COLUMNAR_KERNELS", "0")  # tables whatever the size
    out = tmp_path / "profile.json"
    write_profile(out, attribute_run(GPT2_RUN))
    view = ProfileView.of(read_profile(out))
    assert isinstance(view.operators, OperatorModels)
    assert view.keys_repeat is False
    assert "_op_index" not in view.__dict__
    assert view.operators_of_keys([view.op_keys[3]])[0].key == view.op_keys[3]  # the index, when a key is asked
