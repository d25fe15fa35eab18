"""The reading and analysis commands run with NumPy's huge-page advice off, restored after; a
user's NUMPY_MADVISE_HUGEPAGE stays in force."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core import numpy_pages
from profiler_core.numpy_pages import small_pages

setter = numpy_pages._advice_setter()
pytestmark = pytest.mark.skipif(setter is None, reason="this NumPy has no huge-page switch")


def _advice() -> bool:
    import numpy as np

    core = getattr(np, "_core", None) or np.core
    return bool(core.multiarray._get_madvise_hugepage())


def test_off_inside_and_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    assert setter is not None
    before = setter(True)
    try:
        with small_pages():
            assert _advice() is False
        assert _advice() is True
        with pytest.raises(RuntimeError), small_pages():
            raise RuntimeError("a failing command restores it too")
        assert _advice() is True
    finally:
        setter(before)


def test_a_users_setting_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    assert setter is not None
    before = setter(True)
    try:
        with small_pages():
            assert _advice() is True
    finally:
        setter(before)


def test_an_analysis_command_runs_with_it_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``oprof summary`` of a shipped profile sees the advice off while it runs."""
    import profiler_core.api as api
    from profiler_core.cli import main

    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    seen: list[bool] = []
    load = api.load_profile

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(_advice())
        return load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "load_profile", spy)
    assert setter is not None
    before = setter(True)
    try:
        profile = Path(__file__).parent / "data" / "h200_joinable" / "expected" / "profile.json"
        with pytest.raises(SystemExit) as done:
            main(["summary", str(profile)])
        assert done.value.code in (0, None)
        assert _advice() is True
    finally:
        setter(before)
    assert seen == [False]
