"""Structural comparison of profiles: exact on identity, tolerant on floats, blind to timestamps."""

from __future__ import annotations

import math
from typing import Any

IGNORED_KEYS = frozenset({"created_at", "path"})


def diff_profiles(actual: Any, expected: Any, where: str = "", rel: float = 1e-6) -> list[str]:
    """Differences between two JSON-like trees (empty when they match)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object"]
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            if key in IGNORED_KEYS:
                continue
            if key not in actual or key not in expected:
                out.append(f"{where}.{key}: {'missing' if key not in actual else 'unexpected'}")
                continue
            out.extend(diff_profiles(actual[key], expected[key], f"{where}.{key}", rel))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: length {len(actual) if isinstance(actual, list) else '?'} != {len(expected)}"]
        out = []
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            out.extend(diff_profiles(a, e, f"{where}[{i}]", rel))
        return out
    if isinstance(expected, float) and isinstance(actual, int | float):
        return [] if math.isclose(actual, expected, rel_tol=rel, abs_tol=1e-9) else [f"{where}: {actual} != {expected}"]
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]
