"""benchmarks/analysis_floor.py: its floors read a real columnar profile and do the arithmetic they claim."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def floors():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("analysis_floor", REPO / "benchmarks" / "analysis_floor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def columnar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the shipped GPT-2 capture, written with its kernels and operators as Parquet tables
    import os

    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import write_profile

    out = tmp_path_factory.mktemp("columnar") / "profile.json"
    old = os.environ.get("OPROF_COLUMNAR_KERNELS")
    os.environ["OPROF_COLUMNAR_KERNELS"] = "0"
    try:
        write_profile(out, attribute_run(REPO / "examples/captures/h200/gpt2/baseline"))
    finally:
        if old is None:
            del os.environ["OPROF_COLUMNAR_KERNELS"]
        else:
            os.environ["OPROF_COLUMNAR_KERNELS"] = old
    return out


def test_the_compare_floor_joins_every_operator_of_a_profile_with_its_copy(floors, columnar: Path,  # type: ignore[no-untyped-def]
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from profiler_core.profile_io import read_profile

    copy = floors._copy_of(columnar)
    try:
        assert copy != columnar and copy.is_file() and all(t.is_file() for t in floors._tables(copy))
        floors.floor("compare", str(columnar), str(copy))
    finally:
        import shutil

        shutil.rmtree(copy.parent)
    lines = capsys.readouterr().out.splitlines()
    ops = len(read_profile(columnar).operators)
    deltas = [m for line in lines if (m := re.fullmatch(r"metrics\.(\w+): (\S+), (\d+) same, (\d+) up", line))]
    assert len(deltas) >= 20
    for m in deltas:  # a profile against its copy: no delta, nothing up, every measured operator the same
        assert float(m.group(2)) == 0 and int(m.group(4)) == 0 and 0 < int(m.group(3)) <= ops


def test_a_profile_without_tables_is_refused(floors, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "profile.json").write_text('{"kernels": []}')
    with pytest.raises(SystemExit, match="not a columnar profile"):
        floors.main([str(tmp_path / "profile.json"), "--commands", "compare"])
