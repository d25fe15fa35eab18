"""The thresholds table: documented in docs/diagnose.md, overridable, validated."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from profiler_core.analysis.thresholds import (
    DEFAULT_THRESHOLDS,
    Thresholds,
    parse_threshold_overrides,
    threshold_docs,
    thresholds_with,
)
from profiler_core.errors import ProfilerError

DOC = __import__("pathlib").Path(__file__).parents[2] / "docs" / "diagnose.md"


@pytest.mark.parametrize("name", [f.name for f in fields(Thresholds)])
def test_threshold_documented_with_its_default(name: str) -> None:
    """docs/diagnose.md has a table row naming the threshold and giving its current default."""
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| `{name}` |")]
    assert rows, f"docs/diagnose.md has no row for threshold {name}"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert float(cells[1]) == getattr(DEFAULT_THRESHOLDS, name), f"{name}: doc says {cells[1]}"
    assert cells[2] == threshold_docs()[name]


def test_doc_table_has_no_stale_rows() -> None:
    names = set(re.findall(r"^\| `(\w+)` \| [\d.]+ \|", DOC.read_text(), flags=re.M))
    assert names == {f.name for f in fields(Thresholds)}


def test_every_rule_is_documented() -> None:
    from profiler_core.analysis import RULES

    text = DOC.read_text()
    for rule_id in RULES:
        assert f"| `{rule_id}` |" in text, rule_id


def test_overrides() -> None:
    t = thresholds_with(parse_threshold_overrides(["low_occupancy_pct=30", "recurrent_min_gemms=8"]))
    assert t.low_occupancy_pct == 30.0
    assert t.recurrent_min_gemms == 8 and isinstance(t.recurrent_min_gemms, int)
    assert DEFAULT_THRESHOLDS.low_occupancy_pct == 25.0  # the default is untouched


@pytest.mark.parametrize(("items", "needle"), [
    (["nope=3"], "unknown threshold nope"),
    (["low_occupancy_pct"], "NAME=NUMBER"),
    (["low_occupancy_pct=high"], "NAME=NUMBER"),
    (["recurrent_min_gemms=2.5"], "whole number"),
], ids=["unknown", "no-value", "not-a-number", "fraction-for-count"])
def test_bad_overrides(items: list[str], needle: str) -> None:
    with pytest.raises(ProfilerError, match=needle):
        thresholds_with(parse_threshold_overrides(items))
