"""Multi-rank capture commands, overlap, spread, collective attribution and compare (CPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.attribution import attribute_files
from profiler_core.capture import phases
from profiler_core.capture.config import CounterMode
from profiler_core.cli import load_commands
from profiler_core.distributed import attribute_ranks, comm_overlap, compare_ranks, launch
from profiler_core.distributed.attribute import load_rank_profiles
from profiler_core.distributed.capture import check_gpu_count
from profiler_core.errors import ArtifactFormatError, ToolNotFoundError
from profiler_core.profile_io import read_profile
from profiler_core.rundir import RankEntry, RanksManifest, rank_dir, write_ranks_manifest
from profiler_core.schema import ExecutionContext, OperatorClass

DATA = Path(__file__).resolve().parents[1] / "data"
ALLREDUCE = DATA / "multirank" / "allreduce_kineto.json"
HARNESS = ["python3", "-m", "profiler_core.capture.harness"]


def test_torchrun_command_uses_pytorch_launcher():
    cmd = launch.torchrun_command(HARNESS, 2, ["--phase", "kineto"])
    assert cmd == ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                   "-m", "profiler_core.capture.harness", "--phase", "kineto"]


def test_nsys_runs_per_rank_with_rank_named_output(tmp_path):
    tool = phases.nsys_profile_command(Path("/opt/nsys"), report_base=launch.rank_report_base(tmp_path, "timeline"),
                                       app=[*HARNESS, "--phase", "region"])
    cmd = launch.wrapped_per_rank("python3", 2, tool)
    assert cmd[:7] == ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                       "--no-python"]
    assert cmd[cmd.index("-o") + 1] == f"{tmp_path}/timeline_rank%q{{RANK}}"
    assert "--capture-range=cudaProfilerApi" in cmd  # the measured region only


def test_ncu_targets_all_processes_with_rank_named_output(tmp_path):
    tool = phases.ncu_profile_command(Path("/opt/ncu"), metrics=["sm__cycles_elapsed.avg"],
                                      report_base=launch.rank_report_base(tmp_path, "counters"), app=HARNESS,
                                      mode=CounterMode.PER_CONFIG, replay_mode="kernel", launch_count=1)
    cmd = launch.wrapped_per_rank("python3", 2, launch.ncu_all_processes(tool))
    assert cmd[cmd.index("--target-processes") + 1] == "all"
    assert cmd[cmd.index("-o") + 1].endswith("counters_rank%q{RANK}")
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"


def test_distributed_env_disables_nvls_and_drops_inherited_ranks():
    env = launch.distributed_env({"RANK": "3", "PATH": "/bin", "NCCL_NVLS_ENABLE": "1"})
    assert env == {"PATH": "/bin", "NCCL_NVLS_ENABLE": "0"}


@pytest.mark.parametrize(("available", "nproc"), [(0, 2), (1, 2)], ids=["no-gpu", "one-of-two"])
def test_too_few_gpus_fails_in_one_line(available, nproc):
    with pytest.raises(ToolNotFoundError) as info:
        check_gpu_count(available, nproc)
    assert "\n" not in str(info.value) and f"needs {nproc} CUDA GPUs" in str(info.value)


def test_nccl_kernel_attributes_to_its_collective_both_spellings():
    profile = attribute_files(kineto=ALLREDUCE)
    comm = [o for o in profile.operators if o.name == "c10d::allreduce_"]
    assert [o.key for o in comm] == ["c10d::allreduce_#0", "c10d::allreduce_#1"]  # cpu_op, nccl:all_reduce
    for op in comm:
        assert op.op_class is OperatorClass.COMMUNICATION
        assert op.library == "nccl"
        assert op.execution_context is ExecutionContext.OPAQUE_LIBRARY


def test_overlap_known_answer_on_synthetic_trace():
    stats = comm_overlap(attribute_files(kineto=ALLREDUCE))
    assert stats.nccl_kernels == 2 and stats.nccl_ns == 140_000
    assert stats.overlapped_ns == 50_000 and stats.exposed_ns == 90_000
    assert stats.overlap_share == pytest.approx(50 / 140)


def test_overlap_undefined_without_nccl(joinable):
    stats = comm_overlap(read_profile(DATA / "h200_joinable" / "expected" / "profile.json"))
    assert stats.nccl_kernels == 0 and stats.overlap_share is None
    assert "undefined" in stats.note
    assert stats.compute_ns > 0


def _multi_rank_run(root: Path, scale_rank1: float) -> Path:
    """A two-rank run dir from the real joinable capture; rank 1's kernel times scaled."""
    for r in (0, 1):
        d = rank_dir(root, r)
        d.mkdir(parents=True)
        src = json.loads((DATA / "h200_joinable" / "kineto.json").read_text())
        if r == 1:
            for ev in src["traceEvents"]:
                if ev.get("cat") == "kernel":
                    ev["dur"] = ev["dur"] * scale_rank1
        (d / "kineto.json").write_text(json.dumps(src))
    write_ranks_manifest(root, RanksManifest(operator_profiler="test", created_at="now", workload="w.py",
                                             world_size=2, ranks=[RankEntry(rank=r, dir=f"rank{r}")
                                                                  for r in (0, 1)]))
    return root


def test_attribute_ranks_finds_the_straggler(tmp_path):
    merged = attribute_ranks(_multi_rank_run(tmp_path / "run", 3.0))
    assert merged.totals.slowest_rank == 1
    assert merged.totals.max_ns == pytest.approx(3 * merged.totals.min_ns, rel=1e-3)
    widest = merged.operators[0]
    assert widest.slowest_rank == 1 and widest.ranks == [0, 1]
    assert widest.max_ns == pytest.approx(3 * widest.min_ns, rel=1e-3)
    assert all(o.slowest_rank == 1 for o in merged.operators if o.max_ns > o.min_ns)
    assert all(r.overlap.overlap_share is None for r in merged.ranks)  # the capture has no NCCL
    for r in (0, 1):
        p = read_profile(tmp_path / "run" / f"rank{r}" / "profile.json")
        assert (p.capture.rank, p.capture.world_size) == (r, 2)
    assert json.loads((tmp_path / "run" / "ranks.json").read_text())["world_size"] == 2


def test_compare_two_multi_rank_runs(tmp_path):
    base = _multi_rank_run(tmp_path / "base", 2.0)
    opt = _multi_rank_run(tmp_path / "opt", 1.0)  # the straggler fixed
    attribute_ranks(base)
    attribute_ranks(opt)
    result = compare_ranks(load_rank_profiles(base), load_rank_profiles(opt))
    assert set(result.per_rank) == {0, 1}
    assert result.per_rank[0].verdict == "unchanged"
    assert result.per_rank[1].verdict == "faster"
    assert result.max_delta_pct == pytest.approx(-50.0, abs=0.5)
    assert result.opt_spread_ns == 0 < result.base_spread_ns


def test_cli_attribute_and_compare_multi_rank(tmp_path):
    base = _multi_rank_run(tmp_path / "base", 2.0)
    opt = _multi_rank_run(tmp_path / "opt", 1.0)
    runner, app = CliRunner(), load_commands()
    out = runner.invoke(app, ["attribute", str(base), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["totals"]["slowest_rank"] == 1
    assert runner.invoke(app, ["attribute", str(opt)]).exit_code == 0
    cmp = runner.invoke(app, ["compare", str(base), str(opt), "--json"])
    assert cmp.exit_code == 0, cmp.output
    assert json.loads(cmp.stdout)["base_slowest_rank"] == 1
    # the other way round the slowest rank is 100% slower: --fail-if-slower fails it, by name
    worse = runner.invoke(app, ["compare", str(opt), str(base), "--fail-if-slower", "10"])
    assert worse.exit_code == 1 and "FAIL: slowest rank 100.0% slower (limit 10%)" in worse.stderr
    assert runner.invoke(app, ["compare", str(opt), str(base), "--fail-if-slower", "150"]).exit_code == 0


def test_single_run_reader_points_at_the_ranks(tmp_path):
    from profiler_core.rundir.manifest import read_manifest

    run = _multi_rank_run(tmp_path / "run", 1.0)
    with pytest.raises(ArtifactFormatError, match="multi-rank"):
        read_manifest(run)
    shutil.rmtree(rank_dir(run, 1))
    with pytest.raises(ArtifactFormatError, match="rank1"):
        attribute_ranks(run)


@pytest.mark.slow
def test_harness_under_real_torchrun_two_cpu_ranks(tmp_path):
    """torchrun (gloo on CPU) starts two harness ranks; DDP's allreduce is in each rank's trace."""
    import os
    import subprocess
    import sys

    cmd = launch.torchrun_command([sys.executable, "-m", "profiler_core.capture.harness"], 2, [
        "--phase", "kineto", "--workload", str(DATA / "multirank" / "ddp_tiny.py"), "--compile-mode", "eager",
        "--warmup", "1", "--iters", "1", "--device", "cpu", "--out", str(tmp_path / "rank{rank}" / "kineto.json")])
    env = launch.distributed_env({**os.environ, "OMP_NUM_THREADS": "1",
                                  "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for r in (0, 1):
        names = {e.get("name") for e in json.loads((tmp_path / f"rank{r}" / "kineto.json").read_text())["traceEvents"]}
        assert "c10d::allreduce_" in names
    assert '"rank": 1' in done.stdout and '"world_size": 2' in done.stdout
