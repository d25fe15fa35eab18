"""A columnar profile's tables are confined like every other input: a table linked out of the workspace is refused.

The workspace holds a real capture's profile in its columnar form (profile.json + two Parquet
tables). One table at a time is replaced by a symlink to a copy outside the roots (outside data
an attacker wants read), or to a system file; every tool that reads a profile must refuse it with
the workspace error, without reporting anything about the outside file (not even its size).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.attribution.columnar_copy import columnar_profile_dir
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"
CALLS = [("diagnose", {"profile": "p/profile.json"}), ("report", {"profile": "p/profile.json"}),
         ("get_roofline", {"profile": "p/profile.json"}), ("get_modules", {"profile": "p/profile.json"}),
         ("compare", {"baseline": "p/profile.json", "optimized": "q/profile.json"})]


@pytest.fixture(scope="module")
def columnar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return columnar_profile_dir(tmp_path_factory)


def _setup(columnar: Path, tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    for name in ("p", "q"):
        shutil.copytree(columnar, ws / name)
    return ws, outside


def _table(folder: Path, kind: str) -> Path:
    (table,) = folder.glob(f"profile.{kind}.*.parquet")
    return table


@pytest.mark.anyio
async def test_the_untouched_columnar_profile_is_read(columnar: Path, tmp_path: Path) -> None:
    ws, _ = _setup(columnar, tmp_path)
    assert json.loads((ws / "p" / "profile.json").read_bytes())["kernels"] == []
    async with connect(roots=(ws,)) as client:
        for tool, args in CALLS:
            await call_ok(client, tool, args)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["kernels", "operators"])
async def test_a_table_linked_out_of_the_workspace_is_refused(columnar: Path, tmp_path: Path, kind: str) -> None:
    ws, outside = _setup(columnar, tmp_path)
    table = _table(ws / "p", kind)
    secret = outside / table.name
    shutil.move(table, secret)  # the same bytes: only the link leads out
    table.symlink_to(secret)
    size = str(secret.stat().st_size)
    async with connect(roots=(ws,)) as client:
        for tool, args in CALLS:
            text = await call_err(client, tool, args)
            assert "outside the workspace" in text, (tool, text)
            assert f"{size} bytes" not in text, (tool, text)


@pytest.mark.anyio
async def test_a_table_linked_to_a_system_file_is_refused_before_it_is_looked_at(columnar: Path,
                                                                                 tmp_path: Path) -> None:
    ws, _ = _setup(columnar, tmp_path)
    table = _table(ws / "p", "kernels")
    table.unlink()
    system = Path("/etc/passwd") if Path("/etc/passwd").is_file() else Path(shutil.__file__)
    table.symlink_to(system)
    async with connect(roots=(ws,)) as client:
        text = await call_err(client, "diagnose", {"profile": "p/profile.json"})
    assert "outside the workspace" in text
    assert str(system.stat().st_size) not in text.replace(str(ws), "")
