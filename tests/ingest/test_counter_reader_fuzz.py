"""Fuzz the ncu and Inductor readers with truncated and corrupted copies of real artifacts.

Whatever the damage, a reader either returns records or raises ``ArtifactFormatError``: never
another exception, and a truncated CSV never yields a half-read value. Each run must also see the
untouched file read and some damaged copies still read (a reader refusing everything fails).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_inductor, read_ncu

DATA = Path(__file__).resolve().parent.parent / "data"
CSV_FILES = {
    "raw-base": DATA / "h200_joinable" / "ncu_full_raw.csv",
    "raw-scaled": DATA / "h200_tiny" / "ncu_compiled_mlp_ln_raw.csv",
    "details-stdout": DATA / "h200_tiny" / "ncu_eager_mlp_ln_nvtx_rename.csv",
}
INDUCTOR_FILES = {
    "output-code-log": DATA / "h200_joinable" / "output_code.log",
    "trace-tgz": DATA / "h200_tiny" / "torch_trace_provenance_mlp_ln.tgz",
}
# derandomized: the same damaged copies every run, so "some of them still read" cannot flake
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` (truncated, or whole), with a few bytes overwritten and a few inserted."""
    data = bytearray(original[: draw(st.none() | st.integers(0, len(original)))])
    for _ in range(draw(st.integers(0, 4))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


def _read_copy(reader, data: bytes, suffix: str):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"artifact{suffix}"
        path.write_bytes(data)
        try:
            return reader(path)
        except ArtifactFormatError:
            return None


@pytest.mark.parametrize("kind", list(CSV_FILES), ids=list(CSV_FILES))
def test_damaged_ncu_csv(kind: str) -> None:
    original = CSV_FILES[kind].read_bytes()
    assert _read_copy(read_ncu, original, ".csv") is not None  # the untouched copy is read
    read: list[bool] = []

    @FUZZ
    @given(damaged(original))
    def check(data: bytes) -> None:
        report = _read_copy(read_ncu, data, ".csv")
        assert report is None or report.rows
        read.append(report is not None)

    check()
    assert any(read) and not all(read), read


@st.composite
def redigited(draw: st.DrawFn, original: bytes) -> tuple[bytes, int]:
    """``original`` with a few digits of its data rows (after the header and units) changed to other digits."""
    data = bytearray(original)
    start = original.index(b"\n", original.index(b'"ID"'))
    start = original.index(b"\n", start + 1) + 1  # past the units row
    digits = [i for i in range(start, len(data)) if 48 <= data[i] <= 57]
    changed = 0
    for _ in range(draw(st.integers(1, 6))):
        at = digits[draw(st.integers(0, len(digits) - 1))]
        new = draw(st.integers(48, 57))
        changed += data[at] != new
        data[at] = new
    return bytes(data), changed


# Raw pages only: the details page groups its rows by ID, so a changed ID digit makes a new launch.
@pytest.mark.parametrize("kind", ["raw-base", "raw-scaled"])
def test_ncu_csv_with_other_digits_still_parses(kind: str) -> None:
    original = CSV_FILES[kind].read_bytes()
    launches = len(read_ncu(CSV_FILES[kind]).rows)
    outcomes: set[str] = set()

    @FUZZ
    @given(redigited(original))
    def check(mutant: tuple[bytes, int]) -> None:
        report = _read_copy(read_ncu, mutant[0], ".csv")
        # A digit changed in an ID can make two launches share one (refused) or a value impossible
        # (refused); otherwise the mutant reads, every launch still there.
        assert report is None or len(report.rows) == launches
        outcomes.add("refused" if report is None else "read")

    check()
    assert "read" in outcomes


def test_truncated_ncu_csv_never_half_reads_a_value() -> None:
    path = CSV_FILES["raw-base"]
    original = path.read_bytes()
    full = read_ncu(path).rows

    @FUZZ
    @given(st.integers(0, len(original)))
    def check(cut: int) -> None:
        report = _read_copy(read_ncu, original[:cut], ".csv")
        if report is not None:
            assert report.rows == full[: len(report.rows)]

    check()


@pytest.mark.parametrize("kind", list(INDUCTOR_FILES), ids=list(INDUCTOR_FILES))
def test_damaged_inductor_artifacts(kind: str) -> None:
    path = INDUCTOR_FILES[kind]
    original = path.read_bytes()
    suffix = ".tgz" if path.name.endswith(".tgz") else ".log"

    untouched = _read_copy(read_inductor, original, suffix)
    assert untouched is not None and untouched.fusions
    read: list[bool] = []

    @FUZZ
    @given(damaged(original))
    def check(data: bytes) -> None:
        artifacts = _read_copy(read_inductor, data, suffix)
        assert artifacts is None or artifacts.fusions
        read.append(artifacts is not None)

    check()
    assert any(read) and not all(read), read
