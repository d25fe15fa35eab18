"""A run directory is one capture: copies of a shipped H200 run, each edited one way, each caught.

The untouched copy attributes cleanly first, so each refusal or warning below comes from its edit.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiler_core.api import load_profile
from profiler_core.attribution import attribute_files, attribute_run
from profiler_core.attribution.sources import current_profile
from profiler_core.errors import ArtifactFormatError, AttributionError, ProfilerError
from profiler_core.profile_io import write_profile

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"
RUN = CAPTURES / "sdpa_attention" / "baseline"
OTHER = CAPTURES / "gpt2" / "baseline"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    shutil.copytree(RUN, tmp_path / "run")
    return tmp_path / "run"


def _manifest(run: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((run / "manifest.json").read_text())
    edit(data)
    (run / "manifest.json").write_text(json.dumps(data))


def test_the_untouched_copy_attributes_without_warnings(run: Path) -> None:
    profile = attribute_run(run)
    assert len(profile.kernels) == 30 and not profile.warnings


REFUSED: dict[str, tuple[Callable[[Path], None], type[Exception], str]] = {
    "status-failed": (lambda r: _manifest(r, lambda m: m.update(status="failed", error="ncu crashed")),
                      AttributionError, "marked failed"),
    "status-cancelled": (lambda r: _manifest(r, lambda m: m.update(status="cancelled")),
                         AttributionError, "marked cancelled"),
    "iterations-edited": (lambda r: _manifest(r, lambda m: m["workload"].update(measured_iterations=3)),
                          AttributionError, "3 measured iterations"),
    "another-capture's-manifest": (lambda r: shutil.copy(OTHER / "manifest.json", r / "manifest.json"),
                                   AttributionError, "another capture"),
    "counters-missing": (lambda r: (r / "counters.csv").unlink(), ArtifactFormatError, "lacks it"),
    "trace-missing": (lambda r: (r / "kineto.json.gz").unlink(), ArtifactFormatError, "lacks it"),
    "absolute-entry": (lambda r: _manifest(r, lambda m: m["artifacts"].update(counters_csv="/etc/passwd")),
                       ArtifactFormatError, "outside its run directory"),
    "dotdot-entry": (lambda r: _manifest(r, lambda m: m["artifacts"].update(kineto="../other/kineto.json")),
                     ArtifactFormatError, "outside its run directory"),
}


@pytest.mark.parametrize("edit", list(REFUSED), ids=list(REFUSED))
def test_inconsistent_runs_are_refused(run: Path, edit: str) -> None:
    change, error, match = REFUSED[edit]
    change(run)
    with pytest.raises(error, match=match):
        attribute_run(run)


def test_missing_inductor_files_are_flagged(run: Path) -> None:
    shutil.rmtree(run / "inductor")
    profile = attribute_run(run)
    assert any("lacks them" in w for w in profile.warnings)


def test_a_run_still_marked_running_is_flagged(run: Path) -> None:
    _manifest(run, lambda m: m.update(status="running"))
    assert any("still 'running'" in w for w in attribute_run(run).warnings)


def test_inductor_artifacts_of_another_compile_are_not_used(run: Path) -> None:
    shutil.rmtree(run / "inductor")
    shutil.copytree(OTHER / "inductor", run / "inductor")
    profile = attribute_run(run)
    assert any("another compile" in w and "not used" in w for w in profile.warnings), profile.warnings
    with pytest.raises(ArtifactFormatError, match="another compile"):
        attribute_files(kineto=run / "kineto.json.gz", ncu=run / "counters.csv",
                        inductor=run / "inductor" / "torch_trace.tgz")


def test_a_stale_profile_is_not_believed(run: Path) -> None:
    write_profile(run / "profile.json", attribute_run(run))
    assert not current_profile(run).warnings and load_profile(run / "profile.json").kernels
    _manifest(run, lambda m: m.update(created_at="2030-01-01T00:00:00Z"))
    assert any("stale profile" in w for w in current_profile(run).warnings)
    with pytest.raises(ProfilerError, match="stale"):
        load_profile(run / "profile.json")


def test_a_profile_older_than_its_artifacts_is_stale(run: Path) -> None:
    write_profile(run / "profile.json", attribute_run(run))
    old = (run / "kineto.json.gz").stat().st_mtime - 3600
    os.utime(run / "profile.json", (old, old))
    with pytest.raises(ProfilerError, match="older than the artifacts"):
        load_profile(run / "profile.json")
