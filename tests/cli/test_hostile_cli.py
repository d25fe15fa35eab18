"""A hostile user of the CLI: bad output targets, interrupted writes, odd umasks, Ctrl-C, a hostile file name.

Every case must end in one line naming the file and the fix (exit 2), or 130 for Ctrl-C,
and leave no half-written file, no temp file and no replaced special file behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.atomic_write import write_bytes_atomic, write_files_atomic, write_text_atomic
from profiler_core.cli import load_commands
from profiler_core.errors import OutputError

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"
app = load_commands()


def _oprof(*args: str, stdout: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler_core.cli", *args], cwd=REPO, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def _one_clean_line(stderr: str) -> None:
    assert "Traceback" not in stderr and stderr.count("error:") == 1, stderr


def test_version() -> None:
    from profiler_core import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"oprof {__version__}"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    shutil.copytree(RUN, tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.parametrize(("target", "match"), [
    ("dir", "is a directory"),
    ("/dev/null", "character device, not a regular file"),
    ("/proc/oprof-test/profile.json", "cannot write"),
    ("fifo", "FIFO, not a regular file"),
], ids=["directory", "device", "proc", "fifo"])
def test_attribute_output_targets_are_refused(run: Path, tmp_path: Path, target: str, match: str) -> None:
    if target == "dir":
        target = str(tmp_path)
    elif target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    result = CliRunner().invoke(app, ["attribute", str(run), "-o", target])
    assert result.exit_code == 2, result.output
    assert match in result.output and "Traceback" not in result.output
    if target == "/dev/null":
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_through_a_symlink_writes_the_file_it_points_at(run: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = CliRunner().invoke(app, ["attribute", str(run), "-o", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and '"kernels"' in real.read_text()


def test_export_onto_a_file_is_refused(run: Path, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(target)])
    assert result.exit_code == 2 and "not a directory" in result.output
    assert target.read_text() == "x"


def test_export_on_a_full_disk_changes_nothing(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "csv"
    out.mkdir()
    (out / "kernels.csv").write_text("old kernels\n")
    (out / "operators.csv").write_text("old operators\n")
    real_fsync = os.fsync
    calls = []

    def full_on_second(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr("profiler_core.atomic_write.os.fsync", full_on_second)
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(out)])
    assert result.exit_code == 2 and "No space left on device" in result.output
    assert (out / "kernels.csv").read_text() == "old kernels\n"
    assert (out / "operators.csv").read_text() == "old operators\n"
    assert sorted(p.name for p in out.iterdir()) == ["kernels.csv", "operators.csv"]


def test_json_to_a_full_stdout_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        done = _oprof("diagnose", str(RUN), "--json", stdout=full)
    assert done.returncode == 2
    _one_clean_line(done.stderr)
    assert "stdout" in done.stderr and "No space left" in done.stderr


def test_ctrl_c_exits_130_with_one_line(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("profiler_core.attribution.attribute_run", interrupted)
    result = CliRunner().invoke(app, ["attribute", str(run)])
    assert result.exit_code == 130 and result.output.strip() == "interrupted"


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "150"])
def test_impossible_thresholds_are_refused(value: str) -> None:
    result = CliRunner().invoke(app, ["diagnose", str(RUN), "--threshold", f"low_occupancy_pct={value}"])
    assert result.exit_code == 2 and "threshold low_occupancy_pct" in result.output


_SLOW_WRITER = """
import os, signal, sys, time
from profiler_core import atomic_write
from profiler_core.cli import _terminate
signal.signal(signal.SIGTERM, _terminate)
def slow_fsync(fd):
    print("writing", flush=True)
    time.sleep(60)
atomic_write.os.fsync = slow_fsync
atomic_write.write_bytes_atomic(sys.argv[1], b"x" * 20_000_000)
"""


def test_sigterm_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "profile.json"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)], cwd=REPO, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"writing"
        assert list(tmp_path.glob(".profile.json.*.tmp")), "the temp file should exist while writing"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.communicate()
    assert list(tmp_path.iterdir()) == []


def test_orphans_of_dead_writers_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f".profile.json.{dead.pid}.0123abcd.tmp"
    orphan.write_bytes(b"half")
    staging = tmp_path / f".oprof-files.{dead.pid}.0123abcd.tmp"
    staging.mkdir()
    alive = tmp_path / f".profile.json.{os.getpid()}.89abcdef.tmp"
    alive.write_bytes(b"another writer, still running")
    write_text_atomic(tmp_path / "profile.json", "{}")
    assert not orphan.exists() and not staging.exists() and alive.exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_take_their_mode_from_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        single = write_bytes_atomic(tmp_path / "one.json", b"{}")
        pair = write_files_atomic(tmp_path / "csv", {"a.csv": b"a\n", "b.csv": b"b\n"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(single.stat().st_mode) == mode
    assert {stat.S_IMODE(p.stat().st_mode) for p in pair} == {mode}


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    target.write_text("{}")
    target.chmod(0o640)
    write_text_atomic(target, '{"new": 1}')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == '{"new": 1}'


def test_a_socket_is_not_replaced(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(OutputError, match="socket, not a regular file"):
            write_text_atomic(path, "{}")
        assert stat.S_ISSOCK(path.stat().st_mode)


HOSTILE_NAME = 'w"""+str(open("PWNED","w"))+"""x.py'


@pytest.mark.slow
def test_a_hostile_workload_name_cannot_run_code_in_the_generated_workload(tmp_path: Path) -> None:
    from profiler_core.passes.plan import OptimizationPlan, PlanStatus
    from profiler_core.passes.wrapper import write_optimized_workload

    workload = tmp_path / HOSTILE_NAME
    workload.write_text("import torch\n\ndef get_model_and_inputs(device='cpu'):\n"
                        "    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)\n")
    plan = OptimizationPlan(passes=[], workload=str(workload), device="cpu'''\"\"\"", status=PlanStatus.VALIDATED,
                            compile_mode='x"""y', artifacts={"plan": str(tmp_path / "p'l\"an.json")})
    out = write_optimized_workload(tmp_path / "workload_optimized.py", plan)
    probe = ("import runpy, sys; g = runpy.run_path(sys.argv[1]); "
             "print(g['ORIGINAL_NAME']); print(g['COMPILE_MODE'])")
    done = subprocess.run([sys.executable, "-c", probe, str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [HOSTILE_NAME, 'x"""y']
    assert not (tmp_path / "PWNED").exists()


def test_sigterm_during_a_cli_write_exits_143(tmp_path: Path) -> None:
    """The real entry point installs the handler: a slow `oprof attribute` killed politely cleans up."""
    script = ("import time, sys\nfrom profiler_core import atomic_write\n"
              "def slow(fd):\n    print('writing', flush=True)\n    time.sleep(60)\n"
              "atomic_write.os.fsync = slow\nfrom profiler_core.cli import main\nmain(sys.argv[1:])\n")
    proc = subprocess.Popen([sys.executable, "-c", script, "attribute", str(RUN), "-o", str(tmp_path / "p.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"writing"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        proc.kill()
        proc.communicate()
    assert list(tmp_path.iterdir()) == []
