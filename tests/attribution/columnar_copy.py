"""A real capture's profile written in its columnar form (profile.json + Parquet tables), for tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run
from profiler_core.profile_io import write_profile

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"


def columnar_profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new folder holding the shipped attention capture's profile, columnar at any size."""
    folder = tmp_path_factory.mktemp("columnar")
    write_columnar(RUN, folder)
    return folder


def write_columnar(run: Path, folder: Path) -> Path:
    """``run``'s profile attributed and written in ``folder`` as tables at any size; its profile.json."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPROF_COLUMNAR_KERNELS", "0")
    try:
        write_profile(folder / "profile.json", attribute_run(run))
    finally:
        mp.undo()
    return folder / "profile.json"
