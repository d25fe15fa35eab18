"""slowest(): the longest operators of a profile, from the duration column of a table without
building every operator, in the order a stable sort of the models gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run
from profiler_core.attribution.operator_parquet import OperatorColumns
from profiler_core.attribution.operator_table import slowest
from profiler_core.profile_io import read_profile, write_profile

RUN = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, object]:
    """GPT-2's operators as models, and the same profile read back with its operators as Parquet columns."""
    models = list(attribute_run(RUN).operators)
    folder = tmp_path_factory.mktemp("slowest")
    mp = pytest.MonkeyPatch()
    mp.setenv("OPROF_COLUMNAR_KERNELS", "0")  # the engine keeps columns at any size
    try:
        write_profile(folder / "profile.json", attribute_run(RUN))
    finally:
        mp.undo()
    return models, read_profile(folder / "profile.json").operators


@pytest.mark.parametrize("k", [0, 1, 10, 100, 10_000])
def test_a_table_gives_the_stable_sorts_head(profiles: tuple[list, object], k: int) -> None:
    models, columns = profiles
    assert isinstance(columns, OperatorColumns)
    expected = sorted(models, key=lambda o: -o.duration_ns)[:k]
    # GPT-2's 12 layers repeat: equal durations, whose order only the stable sort fixes
    assert len({o.duration_ns for o in models}) < len(models)
    assert [o.key for o in slowest(columns, k)] == [o.key for o in expected]
    assert slowest(columns, k) == expected
    assert slowest(models, k) == expected
