"""An ncu CSV with whole rows cut out is refused, naming the first missing launch, never joined as it is.

Before, a real H200 export with one launch's row removed (ID 20, or any of nine others) still
attributed with exit 0: the shorter run looked like a per-config sample and a launch "inherited"
counters nobody measured for it. The launch IDs ncu numbers 0, 1, 2, ... say exactly which rows are gone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_ncu

REPO = Path(__file__).resolve().parents[2]
JOINABLE = REPO / "tests" / "data" / "h200_joinable"


def _cut(tmp_path: Path, ids: set[int]) -> Path:
    lines = (JOINABLE / "ncu_full_raw.csv").read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not any(ln.startswith(f'"{i}",') for i in ids)]
    assert len(kept) == len(lines) - len(ids)
    out = tmp_path / "ncu_cut.csv"
    out.write_text("".join(kept))
    return out


def test_the_whole_export_reads() -> None:
    ids = [r.ncu_id for r in read_ncu(JOINABLE / "ncu_full_raw.csv").rows]
    assert ids == list(range(44))


@pytest.mark.parametrize(("ids", "match"), [
    ({5, 6}, r"jump from ID 4 to ID 7: the rows of 2 launch\(es\) \(IDs 5\.\.6\)"),
    ({20}, r"jump from ID 19 to ID 21: .*\(ID 20\)"),
    ({0}, r"jump at the start to ID 1: .*\(ID 0\)")])
def test_cut_rows_are_a_named_error(tmp_path: Path, ids: set[int], match: str) -> None:
    with pytest.raises(ArtifactFormatError, match=match):
        read_ncu(_cut(tmp_path, ids))


@pytest.mark.slow
def test_attribute_on_a_cut_export_fails_in_one_line(tmp_path: Path) -> None:
    cut = _cut(tmp_path, {20})
    out = tmp_path / "profile.json"
    result = subprocess.run([sys.executable, "-m", "profiler_core.cli", "attribute", "--kineto",
                             str(JOINABLE / "kineto.json"), "--ncu", str(cut), "--out", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "(ID 20)" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
