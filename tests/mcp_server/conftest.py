"""Fixtures for the MCP server tests: tmp workspaces, with real H200 artifacts where needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.mcp_server.mcp_helpers import JOINABLE_FILES


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
