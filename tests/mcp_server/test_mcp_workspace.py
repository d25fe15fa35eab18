"""Workspace roots: what resolves inside, what is refused (.., absolute, symlinks out)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_server.workspace import ENV_VAR, Workspace, roots_from_env
from profiler_core.errors import WorkspaceError


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Workspace, Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "runs").mkdir(parents=True)
    outside.mkdir()
    (root / "runs" / "profile.json").write_text("{}")
    (outside / "secret.json").write_text("{}")
    os.symlink(outside / "secret.json", root / "link_out.json")
    os.symlink(outside, root / "dir_out")
    os.symlink(root / "runs" / "profile.json", root / "link_in.json")
    return Workspace([root]), root, outside


@pytest.mark.parametrize("given", ["runs/profile.json", "./runs/../runs/profile.json", "link_in.json"],
                         ids=["relative", "dotdot-inside", "symlink-inside"])
def test_paths_inside_resolve(layout: tuple[Workspace, Path, Path], given: str) -> None:
    ws, root, _ = layout
    assert ws.existing_file(given) == (root / "runs" / "profile.json").resolve()


@pytest.mark.parametrize("given",
                         ["../outside/secret.json", "link_out.json", "dir_out/secret.json", "/etc/passwd"],
                         ids=["dotdot-out", "symlink-file-out", "symlink-dir-out", "absolute-out"])
def test_paths_outside_are_refused(layout: tuple[Workspace, Path, Path], given: str) -> None:
    ws, root, _ = layout
    with pytest.raises(WorkspaceError, match="outside the workspace") as err:
        ws.resolve(given)
    assert str(root.resolve()) in str(err.value)  # the message names the roots
    assert "--root" in str(err.value)  # and the fix


def test_symlink_message_says_where_it_leads(layout: tuple[Workspace, Path, Path]) -> None:
    ws, _, outside = layout
    with pytest.raises(WorkspaceError, match=f"resolves to {outside.resolve()}"):
        ws.resolve("link_out.json")


@pytest.mark.parametrize(("method", "given", "match"), [
    ("existing_file", "runs", "is a directory"),
    ("existing_file", "nope.json", "no such"),
    ("existing_dir", "runs/profile.json", "is a file"),
    ("existing_dir", "nope", "does not exist"),
    ("output_file", "runs", "is a directory"),
    ("resolve", "", "empty path"),
    ("resolve", "a\x00b", "NUL"),
], ids=["file-is-dir", "file-missing", "dir-is-file", "dir-missing", "output-is-dir", "empty", "nul"])
def test_kind_checks(layout: tuple[Workspace, Path, Path], method: str, given: str, match: str) -> None:
    ws, _, _ = layout
    with pytest.raises(WorkspaceError, match=match):
        if method == "output_file":
            ws.output_file(given, kind="profile")
        else:
            getattr(ws, method)(given)


def test_second_root_is_allowed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "x.json").write_text("{}")
    ws = Workspace([a, b])
    assert ws.existing_file(b / "x.json") == (b / "x.json").resolve()
    assert ws.primary == a.resolve()


def test_bad_roots(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace([tmp_path / "missing"])
    with pytest.raises(WorkspaceError, match="no workspace root"):
        Workspace([])


def test_roots_from_env(tmp_path: Path) -> None:
    value = os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")])
    assert roots_from_env({ENV_VAR: value}) == (tmp_path / "a", tmp_path / "b")
    assert roots_from_env({}) == ()
