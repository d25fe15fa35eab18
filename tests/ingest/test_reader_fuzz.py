"""Damaged real artifacts: a reader returns records or raises ArtifactFormatError, nothing else.

Each fuzz run also has to see the reader accept the untouched file and some of the damaged
copies (edits inside a string leave a valid trace): a reader that refused everything would
pass the "records or ArtifactFormatError" check alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import kineto, kineto_stream, read_kineto, read_nsys

DATA = Path(__file__).parent.parent / "data"
KINETO = (DATA / "h200_joinable" / "kineto.json").read_bytes()
NSYS = (DATA / "h200_joinable" / "nsys.sqlite").read_bytes()
# derandomized: the same damaged copies every run, so "some of them still read" cannot flake
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _damage(data: bytes, cut: int | None, edits: list[tuple[int, int]]) -> bytes:
    """Overwrite bytes at (position, value) pairs, then keep only the first ``cut`` bytes."""
    damaged = bytearray(data)
    for position, value in edits:
        damaged[position % len(damaged)] = value
    return bytes(damaged[:cut])


def _edits(size: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    return st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 255)), max_size=8)


def _outcome(read: Callable[[Path], object], path: Path) -> str:
    try:
        result = read(path)
    except ArtifactFormatError as err:
        assert str(path) in str(err)
        return "refused"
    assert result.kernels, "a reader that returns must return kernels"  # type: ignore[attr-defined]
    return "read"


@pytest.mark.parametrize(("read", "data", "name"), [(read_kineto, KINETO, "trace.json"),
                                                    (read_nsys, NSYS, "export.sqlite")], ids=["kineto", "nsys"])
def test_the_untouched_file_is_read(tmp_path: Path, read: Callable[[Path], object], data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    assert _outcome(read, path) == "read"


@pytest.mark.parametrize(
    ("threshold", "frame"), [(1 << 30, 0), (0, 4096), (0, 0)], ids=["whole", "framed", "ijson"]
)
def test_damaged_kineto(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                        threshold: int, frame: int) -> None:
    monkeypatch.setattr(kineto, "STREAM_THRESHOLD_BYTES", threshold)
    monkeypatch.setattr(kineto_stream, "FRAME_BYTES", frame)
    seen: list[str] = []

    @FUZZ
    @given(cut=st.none() | st.integers(0, len(KINETO)), edits=_edits(len(KINETO)))
    def check(cut: int | None, edits: list[tuple[int, int]]) -> None:
        path = tmp_path_factory.mktemp("kineto") / "trace.json"
        path.write_bytes(_damage(KINETO, cut, edits))
        seen.append(_outcome(read_kineto, path))

    check()
    assert {"read", "refused"} <= set(seen), seen


def test_damaged_nsys(tmp_path_factory: pytest.TempPathFactory) -> None:
    seen: list[str] = []

    @FUZZ
    @given(cut=st.none() | st.integers(0, len(NSYS)), edits=_edits(len(NSYS)))
    def check(cut: int | None, edits: list[tuple[int, int]]) -> None:
        path = tmp_path_factory.mktemp("nsys") / "export.sqlite"
        path.write_bytes(_damage(NSYS, cut, edits))
        seen.append(_outcome(read_nsys, path))

    check()
    assert {"read", "refused"} <= set(seen), seen


def test_damaged_nsys_page(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Edits inside one database page reach the rows themselves, not just the header."""
    seen: list[str] = []

    @FUZZ
    @given(edits=st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), min_size=1, max_size=6),
           page=st.integers(0, len(NSYS) // 4096 - 1))
    def check(edits: list[tuple[int, int]], page: int) -> None:
        path = tmp_path_factory.mktemp("nsys") / "export.sqlite"
        path.write_bytes(_damage(NSYS, None, [(page * 4096 + offset, value) for offset, value in edits]))
        seen.append(_outcome(read_nsys, path))

    check()
    assert "read" in seen, seen
