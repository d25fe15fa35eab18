"""Finding ncu / nsys / nvidia-smi: env var, PATH, inside Nsight Compute's folder; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.capture import tools
from profiler_core.errors import ToolNotFoundError


def _exe(path: Path, text: str = "#!/bin/sh\necho 'Version 2025.3.1.0 (build 1)'\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_ncu_from_env_var_wins_over_path(tmp_path: Path) -> None:
    on_path = _exe(tmp_path / "bin" / "ncu")
    pinned = _exe(tmp_path / "pinned" / "ncu")
    env = {"PATH": str(on_path.parent), tools.ENV_NCU: str(pinned)}
    assert tools.find_ncu(env, search_globs=()) == pinned


def test_ncu_from_path(tmp_path: Path) -> None:
    on_path = _exe(tmp_path / "bin" / "ncu")
    assert tools.find_ncu({"PATH": str(on_path.parent)}, search_globs=()) == on_path


def test_ncu_from_install_folder_glob_takes_newest(tmp_path: Path) -> None:
    _exe(tmp_path / "nsight-compute" / "2024.1.0" / "ncu")
    newest = _exe(tmp_path / "nsight-compute" / "2025.3.1" / "ncu")
    found = tools.find_ncu({"PATH": ""}, search_globs=(str(tmp_path / "nsight-compute" / "*" / "ncu"),))
    assert found == newest


def test_env_var_pointing_nowhere_says_which_variable(tmp_path: Path) -> None:
    with pytest.raises(ToolNotFoundError, match=f"{tools.ENV_NCU}=.*no executable ncu there"):
        tools.find_ncu({tools.ENV_NCU: str(tmp_path / "missing"), "PATH": ""}, search_globs=())


def test_missing_ncu_names_the_fixes(tmp_path: Path) -> None:
    with pytest.raises(ToolNotFoundError) as err:
        tools.find_ncu({"PATH": str(tmp_path)}, search_globs=())
    message = str(err.value)
    assert "ncu (Nsight Compute) not found" in message
    assert tools.ENV_NCU in message and "--counters none" in message


def test_non_executable_file_on_path_is_not_a_tool(tmp_path: Path) -> None:
    plain = tmp_path / "bin" / "ncu"
    plain.parent.mkdir()
    plain.write_text("not a program")
    with pytest.raises(ToolNotFoundError):
        tools.find_ncu({"PATH": str(plain.parent)}, search_globs=())


def test_nsys_from_env_var(tmp_path: Path) -> None:
    pinned = _exe(tmp_path / "x" / "nsys")
    assert tools.find_nsys({tools.ENV_NSYS: str(pinned), "PATH": ""}, search_globs=()) == pinned


def test_nsys_inside_nsight_compute_folder_through_a_symlinked_ncu(tmp_path: Path) -> None:
    root = tmp_path / "opt" / "nsight-compute" / "2025.3.1"
    real_ncu = _exe(root / "ncu")
    shipped = _exe(root / "host" / "target-linux-x64" / "nsys")
    link_dir = tmp_path / "cuda" / "bin"
    link_dir.mkdir(parents=True)
    (link_dir / "ncu").symlink_to(real_ncu)  # the CUDA toolkit's bin/ncu is a link into the install
    found = tools.find_nsys({"PATH": str(link_dir)}, ncu=link_dir / "ncu", search_globs=())
    assert found == shipped


def test_nsys_on_path_wins_over_the_copy_inside_ncu(tmp_path: Path) -> None:
    root = tmp_path / "ncu-root"
    ncu = _exe(root / "ncu")
    _exe(root / "host" / "target-linux-x64" / "nsys")
    on_path = _exe(tmp_path / "bin" / "nsys")
    assert tools.find_nsys({"PATH": str(on_path.parent)}, ncu=ncu, search_globs=()) == on_path


def test_missing_nsys_says_the_kineto_trace_serves(tmp_path: Path) -> None:
    ncu = _exe(tmp_path / "ncu-root" / "ncu")
    with pytest.raises(ToolNotFoundError) as err:
        tools.find_nsys({"PATH": str(tmp_path)}, ncu=ncu, search_globs=())
    message = str(err.value)
    assert "inside Nsight Compute's folder" in message and tools.ENV_NSYS in message
    assert "Kineto trace serves as the timeline" in message


def test_nvidia_smi_missing_suggests_observe(tmp_path: Path) -> None:
    with pytest.raises(ToolNotFoundError, match="--clocks observe"):
        tools.find_nvidia_smi({"PATH": str(tmp_path)})


@pytest.mark.parametrize(
    ("output", "version"),
    [
        (
            "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
            "Version 2025.3.1.0 (build 36398880) (public-release)\n",
            "2025.3.1.0",
        ),
        ("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0\n", "2025.3.1.90"),
        ("garbage\n", None),
    ],
    ids=["nsight-compute", "nsight-systems", "no-version"],
)
def test_parse_version(output: str, version: str | None) -> None:
    assert tools.parse_version(output) == version


def test_tool_version_runs_the_tool(tmp_path: Path) -> None:
    exe = _exe(
        tmp_path / "ncu", "#!/bin/sh\necho 'NVIDIA Nsight Systems version 2024.6.2.225-246235244400v0'\n"
    )
    assert tools.tool_version(exe) == "2024.6.2.225"
    assert tools.tool_version(tmp_path / "absent") is None
