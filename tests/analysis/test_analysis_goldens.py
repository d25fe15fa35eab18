"""The analysis layer reproduces its frozen outputs on every shipped capture (tests/analysis/goldens.py).

A failure names the capture, the output (findings, summary, markdown, comparison) and the first
place it differs. After a change meant to alter what is printed: ``python -m tests.analysis.goldens``,
then read the diff of tests/data/analysis_goldens/ before committing it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.goldens import RUNS, analysed, compared, normalised, pairs, read_golden, run_id


@cache
def _profile(run: Path) -> Any:
    from profiler_core.attribution import attribute_run

    return attribute_run(run)


def _first_difference(got: Any, want: Any, where: str = "") -> str | None:
    if type(got) is not type(want):
        return f"{where or '/'}: {type(want).__name__} expected, {type(got).__name__} found"
    if isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                return f"{where}/{key}: {'missing' if key not in got else 'not expected'}"
            found = _first_difference(got[key], want[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(want, list):
        for i, (a, b) in enumerate(zip(got, want, strict=False)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None if len(got) == len(want) else f"{where}: {len(want)} items expected, {len(got)} found"
    return None if got == want else f"{where}: {want!r} expected, {got!r} found"


def _check(name: str, got: dict[str, Any]) -> None:
    want = read_golden(name)
    for part in want:
        diff = _first_difference(normalised(got[part]), want[part], f"{name}:{part}")
        assert diff is None, f"{diff} (a meant change? python -m tests.analysis.goldens)"


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=run_id)
def test_analysis_of_a_shipped_capture_matches_its_golden(run: Path) -> None:
    _check(run_id(run), analysed(_profile(run)))


@pytest.mark.slow
@pytest.mark.parametrize(("base", "opt"), pairs(), ids=lambda p: p.parent.name if isinstance(p, Path) else str(p))
def test_comparison_of_a_shipped_pair_matches_its_golden(base: Path, opt: Path) -> None:
    _check(f"{base.parent.name}__compare", compared(_profile(base), _profile(opt)))


@cache
def _columnar_profile(run: Path, folder: Path) -> Any:
    """The capture's profile written columnar (Parquet tables at any size) and read back: the analysis
    then reads kernel and operator tables, building kernel models only where it asks for them."""
    from profiler_core.attribution import attribute_run
    from profiler_core.attribution.kernel_table import KernelTable
    from profiler_core.profile_io import read_profile, write_profile

    mp = pytest.MonkeyPatch()
    mp.setenv("OPROF_COLUMNAR_KERNELS", "0")
    try:
        write_profile(folder / run_id(run) / "profile.json", attribute_run(run))
    finally:
        mp.undo()
    profile = read_profile(folder / run_id(run) / "profile.json")
    assert isinstance(profile.kernels, KernelTable)
    return profile


@pytest.fixture(scope="module")
def columnar_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("columnar_goldens")


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=run_id)
def test_a_shipped_capture_read_as_tables_matches_its_golden(run: Path, columnar_folder: Path) -> None:
    _check(run_id(run), analysed(_columnar_profile(run, columnar_folder)))


@pytest.mark.slow
@pytest.mark.parametrize(("base", "opt"), pairs(), ids=lambda p: p.parent.name if isinstance(p, Path) else str(p))
def test_a_shipped_pair_read_as_tables_compares_as_its_golden(base: Path, opt: Path, columnar_folder: Path) -> None:
    _check(f"{base.parent.name}__compare",
           compared(_columnar_profile(base, columnar_folder), _columnar_profile(opt, columnar_folder)))


def test_a_changed_output_is_named_where_it_changed() -> None:
    golden = {"findings": {"findings": [{"rule_id": "host_bound", "severity": "high"}]}}
    changed = {"findings": {"findings": [{"rule_id": "host_bound", "severity": "medium"}]}}
    assert _first_difference(changed, golden) == "/findings/findings[0]/severity: 'high' expected, 'medium' found"
    assert _first_difference({"a": [1, 2]}, {"a": [1, 2, 3]}) == "/a: 3 items expected, 2 found"
    assert _first_difference(golden, golden) is None
