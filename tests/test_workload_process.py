"""The bounded child process that runs workload code: every way it can end, by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.errors import PassError, WorkloadProcessError
from profiler_core.workload_process import ChildLimits, run_in_child

# runpy.run_path executes a file the way a workload import does, without torch: a fast child
RUN_FILE = "runpy:run_path"
SHORT = ChildLimits(timeout_s=60)

pytestmark = pytest.mark.slow


def _run(path: Path, limits: ChildLimits = SHORT) -> object:
    return run_in_child(RUN_FILE, {"path_name": str(path)}, workload=path, limits=limits, label="test")


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_result_comes_back(tmp_path: Path) -> None:
    path = _write(tmp_path, "fine.py", "ANSWER = 6 * 7\n")
    assert _run(path)["ANSWER"] == 42  # type: ignore[index]


def test_os_exit_is_named_with_its_code(tmp_path: Path) -> None:
    path = _write(tmp_path, "hard_exit.py", "import os\nprint('bye')\nos._exit(7)\n")
    with pytest.raises(WorkloadProcessError, match=r"hard_exit\.py ended the process with exit code 7") as err:
        _run(path)
    assert err.value.how == "exit" and "bye" in err.value.output.stdout


def test_sys_exit_at_import_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "quits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(WorkloadProcessError, match=r"quits\.py called sys\.exit\(3\) \(at quits\.py:2\)") as err:
        _run(path)
    assert err.value.how == "exit"


def test_hang_is_killed_at_the_timeout(tmp_path: Path) -> None:
    path = _write(tmp_path, "spins.py", "print('spinning', flush=True)\nwhile True:\n    pass\n")
    with pytest.raises(WorkloadProcessError, match=r"spins\.py ran past the 3 s limit and was killed") as err:
        _run(path, ChildLimits(timeout_s=3))
    assert err.value.how == "timeout" and "spinning" in str(err.value)


def test_huge_output_is_capped(tmp_path: Path) -> None:
    body = "import sys\nfor _ in range(300):\n    sys.stdout.write('x' * 100_000 + '\\n')\nsys.exit(1)\n"
    path = _write(tmp_path, "noisy.py", body)
    with pytest.raises(WorkloadProcessError) as err:
        _run(path, ChildLimits(timeout_s=60, output_bytes=8192))
    kept = err.value.output.stdout
    assert len(kept) < 9000 and "bytes not kept" in kept  # 30 MB printed, 8 KiB kept
    assert len(str(err.value)) < 1000


def test_memory_cap_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "hog.py", "blob = bytearray(64 << 30)\n")
    with pytest.raises(WorkloadProcessError, match=r"hog\.py ran out of memory under the 1 GiB cap") as err:
        _run(path, ChildLimits(timeout_s=60, memory_bytes=1 << 30))
    assert err.value.how == "memory"


def test_signal_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "killed.py", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    with pytest.raises(WorkloadProcessError, match=r"killed\.py was killed by SIGTERM") as err:
        _run(path)
    assert err.value.how == "signal"


def test_library_errors_keep_their_class(tmp_path: Path) -> None:
    path = _write(tmp_path, "w.py", "x = 1\n")
    with pytest.raises(PassError, match="no pass to apply"):
        run_in_child("profiler_core.passes.planner:apply_pass_plan",
                     {"workload_path": str(path), "pass_names": [], "device": "cpu"},
                     workload=path, limits=SHORT)


def test_limits_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_WORKLOAD_TIMEOUT_S", "12")
    monkeypatch.setenv("OPROF_WORKLOAD_MEMORY_GB", "0")
    limits = ChildLimits.for_device("cpu")
    assert limits.timeout_s == 12 and limits.memory_bytes is None
    monkeypatch.delenv("OPROF_WORKLOAD_MEMORY_GB")
    assert ChildLimits.for_device("cuda").memory_bytes is None  # CUDA reserves address space beyond any cap
    assert (ChildLimits.for_device("cpu").memory_bytes or 0) > 0
    monkeypatch.setenv("OPROF_WORKLOAD_TIMEOUT_S", "soon")
    with pytest.raises(Exception, match="OPROF_WORKLOAD_TIMEOUT_S='soon' is not a number"):
        ChildLimits.for_device("cpu")
