"""Damaged real artifacts: a reader returns records or raises ArtifactFormatError, nothing else.

The untouched artifacts are read, and some damaged nsys exports still are (an edit in a page no
query reaches): the fuzzing does not just watch every file be refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import kineto, kineto_stream, read_kineto, read_nsys

DATA = Path(__file__).parent.parent / "data"
KINETO = (DATA / "h200_joinable" / "kineto.json").read_bytes()
NSYS = (DATA / "h200_joinable" / "nsys.sqlite").read_bytes()
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _damage(data: bytes, cut: int | None, edits: list[tuple[int, int]]) -> bytes:
    """Overwrite bytes at (position, value) pairs, then keep only the first ``cut`` bytes."""
    damaged = bytearray(data)
    for position, value in edits:
        damaged[position % len(damaged)] = value
    return bytes(damaged[:cut])


def _edits(size: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    return st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 255)), max_size=8)


def _outcome(read, path: Path) -> str:  # type: ignore[no-untyped-def]
    try:
        result = read(path)
    except ArtifactFormatError as err:
        assert str(path) in str(err)
        return "refused"
    assert result.kernels, "a reader that returns must return kernels"
    return "read"


@pytest.mark.parametrize(
    ("threshold", "frame"), [(1 << 30, 0), (0, 4096), (0, 0)], ids=["whole", "framed", "ijson"]
)
@FUZZ
@given(cut=st.none() | st.integers(0, len(KINETO)), edits=_edits(len(KINETO)))
def test_damaged_kineto(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                        threshold: int, frame: int, cut: int | None, edits: list[tuple[int, int]]) -> None:
    monkeypatch.setattr(kineto, "STREAM_THRESHOLD_BYTES", threshold)
    monkeypatch.setattr(kineto_stream, "FRAME_BYTES", frame)
    path = tmp_path_factory.mktemp("kineto") / "trace.json"
    path.write_bytes(_damage(KINETO, cut, edits))
    _outcome(read_kineto, path)


@FUZZ
@given(cut=st.none() | st.integers(0, len(NSYS)), edits=_edits(len(NSYS)))
def test_damaged_nsys(tmp_path_factory: pytest.TempPathFactory, cut: int | None,
                      edits: list[tuple[int, int]]) -> None:
    path = tmp_path_factory.mktemp("nsys") / "export.sqlite"
    path.write_bytes(_damage(NSYS, cut, edits))
    _outcome(read_nsys, path)


def test_damaged_nsys_page(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Edits inside one database page reach the rows themselves, not just the header."""
    untouched = tmp_path_factory.mktemp("nsys") / "export.sqlite"
    untouched.write_bytes(NSYS)
    assert _outcome(read_nsys, untouched) == "read"
    outcomes: set[str] = set()

    @FUZZ
    @given(edits=st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), min_size=1, max_size=6),
           page=st.integers(0, len(NSYS) // 4096 - 1))
    def check(edits: list[tuple[int, int]], page: int) -> None:
        path = tmp_path_factory.mktemp("nsys") / "export.sqlite"
        path.write_bytes(_damage(NSYS, None, [(page * 4096 + offset, value) for offset, value in edits]))
        outcomes.add(_outcome(read_nsys, path))

    check()
    assert "read" in outcomes
