"""Nsight Compute units, normalised to base units.

``ncu --print-units base`` prints every value in base units (``ns``, ``byte``); without it ncu
scales each value for reading (``us``, ``Kbyte``, ``Gbyte/second``), and the scale can differ from
one kernel to the next. Values are therefore normalised one by one::

    ("us", 8.032)         -> ("ns", 8032.0)
    ("Kbyte/block", 6.14) -> ("byte/block", 6140.0)
    ("register/thread", 80) unchanged

ncu's byte prefixes are decimal (``Kbyte`` = 1000 bytes). A unit this module does not know is an
error rather than a guess: the fix is to re-export with ``--print-units base``.
"""

from __future__ import annotations

from functools import lru_cache

from profiler_core.errors import ArtifactFormatError

# Time as a quantity normalises to nanoseconds (ncu's base); as a denominator, to seconds.
_TIME_NS: dict[str, float] = {
    "ns": 1.0, "nsecond": 1.0, "nsec": 1.0,
    "us": 1e3, "usecond": 1e3, "usec": 1e3,
    "ms": 1e6, "msecond": 1e6, "msec": 1e6,
    "s": 1e9, "second": 1e9, "sec": 1e9,
}
_BYTES: dict[str, float] = {
    "byte": 1.0, "B": 1.0,
    "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3, "TiB": 1024.0**4,
}
# 1 Hz is one cycle per second; ncu prints clocks either way depending on its version.
_FREQUENCY_PER_S: dict[str, float] = {
    "hz": 1.0, "Hz": 1.0, "Khz": 1e3, "KHz": 1e3, "khz": 1e3,
    "Mhz": 1e6, "MHz": 1e6, "mhz": 1e6, "Ghz": 1e9, "GHz": 1e9, "ghz": 1e9,
}
# Counted things ncu names in units; they carry no scale.
_COUNT_WORDS = frozenset({
    "cycle", "inst", "warp", "thread", "block", "register", "sector", "request", "wavefront",
    "SM", "sm", "TPC", "tpc", "pass", "cluster", "instance", "transaction", "lane", "bit",
})

BASE_UNITS_HINT = (
    "re-export with --print-units base (ncu --import R.ncu-rep --csv --page raw --print-units base)"
)


def normalise_unit(unit: str, metric: str, origin: str = "ncu export") -> tuple[str, float]:
    """The base unit of ``unit`` and the factor that converts a value into it."""
    found = _lookup(unit)
    if found is None:
        raise ArtifactFormatError(
            f"{origin}: unknown unit {unit!r} for metric {metric!r}: cannot convert it to base units; "
            f"{BASE_UNITS_HINT}"
        )
    return found


@lru_cache(maxsize=256)
def _lookup(unit: str) -> tuple[str, float] | None:
    unit = unit.strip()
    if unit in ("", "%"):
        return unit, 1.0
    parts = unit.split("/")
    if len(parts) == 1:
        if unit in _TIME_NS:
            return "ns", _TIME_NS[unit]
        if unit in _FREQUENCY_PER_S:
            return "cycle/second", _FREQUENCY_PER_S[unit]
        return _quantity(unit)
    if len(parts) != 2:
        return None
    numerator = _quantity(parts[0])
    if numerator is None:
        return None
    base, scale = numerator
    denominator = parts[1]
    if denominator in _TIME_NS:
        return f"{base}/second", scale * 1e9 / _TIME_NS[denominator]
    if denominator in _COUNT_WORDS:
        return f"{base}/{denominator}", scale
    return None


def _quantity(word: str) -> tuple[str, float] | None:
    if word in _BYTES:
        return "byte", _BYTES[word]
    if word in _COUNT_WORDS:
        return word, 1.0
    return None


MISSING_CELLS = frozenset({"", "n/a", "N/A"})  # what ncu writes where a launch has no value


def parse_dim3(cell: str, column: str, where: str) -> tuple[int, int, int] | None:
    """A launch dimension cell, ``(x, y, z)`` (missing axes are 1); None where ncu wrote no value."""
    if cell in MISSING_CELLS:
        return None
    try:
        parts = [int(p) for p in cell.strip().strip("()").split(",")]
    except ValueError:
        parts = []
    if not 1 <= len(parts) <= 3:
        raise ArtifactFormatError(f"{where}: column {column!r} holds {cell[:60]!r}, not '(x, y, z)'")
    dims = (parts + [1, 1])[:3]
    return dims[0], dims[1], dims[2]
