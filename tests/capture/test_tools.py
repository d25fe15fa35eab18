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


# The H200 image's layout: CUDA's bin/ncu is a launcher script (reached through the cuda ->
# cuda-13.0 link) that runs the newest Nsight Compute under /opt/nvidia/nsight-compute/<ver>/,
# whose nsys lives in host/target-linux-x64/ and its importer in host/linux-desktop-glibc_2_11_3-x64/.
def _h200_tree(tmp_path: Path, script_names_folder: bool = True, versions=("2024.3.0", "2025.3.1")) -> dict:
    opt = tmp_path / "opt" / "nvidia" / "nsight-compute"
    roots = {}
    for version in versions:
        root = opt / version
        _exe(root / "ncu", f"#!/bin/sh\necho 'NVIDIA (R) Nsight Compute Command Line Profiler'\n"
                           f"echo 'Version {version}.0 (build 1) (public-release)'\n")
        roots[version] = root
    newest = roots[versions[-1]]
    nsys = _exe(newest / "host" / "target-linux-x64" / "nsys")
    importer = _exe(newest / "host" / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter")
    cuda = tmp_path / "usr" / "local" / "cuda-13.0"
    picker = (f'NCU_ROOT=$(ls -d {opt}/*/ 2>/dev/null | sort -V | tail -n 1)' if script_names_folder
              else 'NCU_ROOT=$(cat "$HOME/.ncu-root")')
    wrapper = _exe(cuda / "bin" / "ncu", "#!/bin/sh\n# Runs the newest Nsight Compute installed on this machine.\n"
                                         f'{picker}\nexec "${{NCU_ROOT}}ncu" "$@"\n')
    (tmp_path / "usr" / "local" / "cuda").symlink_to(cuda)
    return {"path": tmp_path / "usr" / "local" / "cuda" / "bin", "wrapper": wrapper, "nsys": nsys,
            "importer": importer, "opt": opt, "newest": newest}


def test_the_wrapper_layout_is_real(tmp_path: Path) -> None:
    tree = _h200_tree(tmp_path)
    ncu = tools.find_ncu({"PATH": str(tree["path"])}, search_globs=())
    assert ncu == tree["path"] / "ncu" and ncu.resolve() == tree["wrapper"]
    assert tools.tool_version(ncu) == "2025.3.1.0"  # the launcher runs the newest Nsight Compute
    assert not (ncu.resolve().parent / tools.NSYS_INSIDE_NCU).exists()  # nothing beside the script


def test_nsys_found_through_the_cuda_launcher_script(tmp_path: Path) -> None:
    tree = _h200_tree(tmp_path)
    ncu = tools.find_ncu({"PATH": str(tree["path"])}, search_globs=())
    found = tools.find_nsys({"PATH": str(tree["path"])}, ncu=ncu, search_globs=(), ncu_install_globs=())
    assert found == tree["nsys"]
    assert tools.nsight_compute_folders(ncu, install_globs=())[:2] == [tree["wrapper"].parent, tree["newest"]]


def test_nsys_found_in_nsight_compute_install_folders_when_the_script_names_none(tmp_path: Path) -> None:
    tree = _h200_tree(tmp_path, script_names_folder=False, versions=("2025.3.1", "2025.10.0"))
    ncu = tools.find_ncu({"PATH": str(tree["path"])}, search_globs=())
    with pytest.raises(ToolNotFoundError, match="inside Nsight Compute's folder"):
        tools.find_nsys({"PATH": str(tree["path"])}, ncu=ncu, search_globs=(), ncu_install_globs=())
    found = tools.find_nsys({"PATH": str(tree["path"])}, ncu=ncu, search_globs=(),
                            ncu_install_globs=(str(tree["opt"] / "*"),))
    assert found == tree["nsys"] and "2025.10.0" in str(found)  # 2025.10 is newer than 2025.3


def test_nsys_in_nsight_systems_install_folder_sorted_by_version(tmp_path: Path) -> None:
    older = _exe(tmp_path / "nsight-systems" / "2025.9.1" / "bin" / "nsys")
    newer = _exe(tmp_path / "nsight-systems" / "2025.10.2" / "bin" / "nsys")
    found = tools.find_nsys({"PATH": ""}, search_globs=(str(tmp_path / "nsight-systems" / "*" / "bin" / "nsys"),))
    assert found == newer != older


def test_importer_of_the_nsys_inside_nsight_compute(tmp_path: Path) -> None:
    from profiler_core.capture.nsys_import import importer_of

    tree = _h200_tree(tmp_path)
    assert importer_of(tree["nsys"]) == tree["importer"]


def test_import_failure_hint_from_the_loader_error(tmp_path: Path) -> None:
    from profiler_core.capture.nsys_import import import_failure_hint

    log = tmp_path / "timeline.stderr"
    log.write_text("Collecting data...\n/opt/nvidia/nsight-compute/2025.3.1/host/linux-desktop-glibc_2_11_3-x64/"
                   "QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open shared object "
                   "file: No such file or directory\n")
    hint = import_failure_hint([log, tmp_path / "absent.stdout"], None)
    assert hint is not None and "libdw.so.1" in hint and "apt-get install libdw1" in hint
    clean = tmp_path / "ok.stderr"
    clean.write_text("Generated: timeline.nsys-rep\n")
    assert import_failure_hint([clean], None) is None


def test_import_failure_hint_asks_ldd_when_the_log_is_silent(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from profiler_core.capture import nsys_import

    tree = _h200_tree(tmp_path)
    seen = []

    def fake_ldd(cmd, **kw):
        seen.append(cmd)
        out = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibdw.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x7f)\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(nsys_import.subprocess, "run", fake_ldd)
    silent = tmp_path / "silent.stderr"
    silent.write_text("")
    hint = nsys_import.import_failure_hint([silent], tree["nsys"])
    assert seen == [["ldd", str(tree["importer"])]]
    assert hint is not None and "dnf install elfutils-libs" in hint
