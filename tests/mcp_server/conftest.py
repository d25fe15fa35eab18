"""Fixtures for the MCP server tests: tmp workspaces, with real H200 artifacts where needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.mcp_server.mcp_helpers import JOINABLE_FILES, PAIR_FILES


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace root."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def joinable_ws(workspace: Path, joinable: Path) -> Path:
    """A workspace holding a copy of the real H200 capture (as a run directory without manifest)."""
    run = workspace / "h200"
    run.mkdir()
    for name in JOINABLE_FILES:
        shutil.copy(joinable / name, run / name)
    return workspace


@pytest.fixture(scope="module")
def pair_ws(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A workspace with base/ and opt/ run directories of the H200 pair, each attributed to profile.json."""
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import write_profile

    ws = tmp_path_factory.mktemp("pair")
    for side in ("base", "opt"):
        run = ws / side
        run.mkdir()
        for name, source in PAIR_FILES.items():
            shutil.copy(data_dir / "h200_pair" / source.format(side=side), run / name)
        write_profile(run / "profile.json", attribute_run(run))
    return ws
