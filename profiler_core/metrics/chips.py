"""Which ncu chip a GPU is: from its compute capability, or from its name. One table for both.

The chip name (``gh100``, ``gb202`` ...) is what ``ncu --chip`` takes and what picks a
counter's metric spelling (see :mod:`profiler_core.metrics.catalog`)::

    chip_for_capability((9, 0))   -> "gh100"
    chip_from_name("NVIDIA H200") -> "gh100"
    chip_from_name("8.7")         -> "ga10b"     (Jetson Orin)
"""

from __future__ import annotations

import re

# Compute capability -> the ncu chip name whose metric list stands for that architecture
# (metric names agree within a family, so the family's largest chip stands for it).
CHIP_BY_CAPABILITY: dict[tuple[int, int], str] = {
    (7, 0): "gv100",
    (7, 5): "tu102",
    (8, 0): "ga100",
    (8, 6): "ga102",
    (8, 7): "ga10b",
    (8, 9): "ad102",
    (9, 0): "gh100",
    (10, 0): "gb100",
    (12, 0): "gb202",
}

# Marketing names -> chip, most specific first.
_NAME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), chip)
    for pattern, chip in (
        (r"\bG?H(100|200|800|20)\b", "gh100"),
        (r"\bG?B(100|200)\b", "gb100"),
        (r"\bRTX\s*(PRO\s*6000|5090)\b", "gb202"),
        (r"\bRTX\s*(4090|6000\s*Ada)\b|\bL40S?\b", "ad102"),
        (r"\bL4\b", "ad104"),
        (r"\bA(100|800|30)\b", "ga100"),
        (r"\bRTX\s*(3090|3080)\b|\bA(10G?|40)\b", "ga102"),
        (r"\bV100\b", "gv100"),
        (r"\bT4\b", "tu104"),
    )
)
_CC = re.compile(r"^(?:sm_?)?(\d+)(?:\.(\d))?$", re.IGNORECASE)


def chip_for_capability(capability: tuple[int, int] | None) -> str | None:
    """ncu chip name for a compute capability, e.g. (9, 0) -> "gh100"; None for one not in the table."""
    if capability is None:
        return None
    major, minor = capability
    return CHIP_BY_CAPABILITY.get((int(major), int(minor)))


def chip_from_name(name: str) -> str | None:
    """The ncu chip for a GPU name (``NVIDIA H200``) or compute capability (``9.0``, ``sm_90``)."""
    text = name.strip()
    cc = _CC.match(text)
    if cc:
        if cc.group(2) is not None:
            return chip_for_capability((int(cc.group(1)), int(cc.group(2))))
        digits = cc.group(1)  # "sm_90" / "90" / "120": the last digit is the minor version
        if len(digits) < 2:
            return None
        return chip_for_capability((int(digits[:-1]), int(digits[-1])))
    for pattern, chip in _NAME_PATTERNS:
        if pattern.search(text):
            return chip
    return None
