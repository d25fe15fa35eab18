"""End-to-end wall times on a CPU: perf_counter in process, and the fresh-interpreter ``measure``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from profiler_core.errors import ToolFailedError, WorkloadError
from profiler_core.optimize import OptimizeConfig, loop, optimize, walltime
from profiler_core.optimize import trial as trial_mod
from profiler_core.optimize.walltime import WallTime, measure, measure_in_process
from tests.analysis.real_profiles import pair_profile
from tests.optimize.test_loop import EAGER, EXAMPLE, FakeCapture

NO_ENTRY = "import torch\n\n\ndef make_model():\n    return torch.nn.Identity()\n"


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")


def _check(wt: WallTime, iters: int) -> None:
    figures = wt.as_dict()
    assert figures["iterations"] == iters == len(wt.iterations_ms)
    assert all(ms > 0 for ms in wt.iterations_ms)
    assert figures["min_ms"] <= figures["p10_ms"] <= figures["median_ms"] <= figures["p90_ms"] <= figures["max_ms"]


def test_in_process_on_cpu_uses_the_host_clock(small: None) -> None:
    _check(measure_in_process(EXAMPLE, iters=4, warmup=1, compile_mode="eager", device="cpu"), 4)


@pytest.mark.parametrize("kwargs, message", [
    ({"iters": 0, "compile_mode": "eager"}, "at least one iteration"),
    ({"iters": 2, "compile_mode": "fastest"}, "unknown compile mode 'fastest'"),
], ids=["no-iterations", "unknown-mode"])
def test_in_process_rejects_bad_settings(small: None, kwargs: dict, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        measure_in_process(EXAMPLE, warmup=0, device="cpu", **kwargs)


@pytest.mark.slow
def test_measure_runs_a_fresh_interpreter_on_cpu(small: None) -> None:
    _check(measure(EXAMPLE, iters=3, warmup=1, compile_mode="eager", device="cpu"), 3)


@pytest.mark.slow
def test_measure_names_a_broken_workload(tmp_path: Path) -> None:
    broken = tmp_path / "no_entry.py"
    broken.write_text(NO_ENTRY)
    with pytest.raises(WorkloadError, match="no_entry.py: wall-time run failed: .*get_model_and_inputs"):
        measure(broken, iters=2, warmup=0, compile_mode="eager", device="cpu")


def test_wall_time_figures() -> None:
    wt = WallTime(tuple(float(x) for x in (5, 1, 4, 2, 3, 10, 9, 8, 7, 6, 11)))
    assert wt.as_dict() == {"iterations": 11, "median_ms": 6.0, "p10_ms": 2.0, "p90_ms": 10.0,
                            "min_ms": 1.0, "max_ms": 11.0}
    with pytest.raises(ValueError, match="at least one iteration"):
        WallTime(())


@pytest.mark.slow
def test_loop_times_the_baseline_and_the_kept_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  small: None) -> None:
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base"), pair_profile("opt")]))
    # the captures are faked (the plan faster on kernel time), the CPU timings are real and noisy at 3
    # iterations: this test is about their bookkeeping, the end-to-end veto has its own test below
    monkeypatch.setattr(trial_mod, "WALL_VETO", float("inf"))
    out = tmp_path / "run"
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=out, budget=3, device="cpu", yardstick=False, wall_iters=3,
                                              wall_warmup=1,
                                              capture=EAGER))
    assert result.kept_passes == ["qkv_fusion"]
    kept = next(t for t in result.trials if t.outcome == "kept")
    assert kept.judged_on == "kernel_time" and kept.wall_ms == result.wall_time["optimized"]["median_ms"]
    assert set(result.wall_time) == {"baseline", "optimized"}
    assert all(w["iterations"] == 3 for w in result.wall_time.values())
    assert result.wall_speedup == pytest.approx(result.wall_time["baseline"]["median_ms"]
                                                / result.wall_time["optimized"]["median_ms"])
    assert json.loads((out / "walltime.json").read_text()) == result.wall_time
    assert result.notes == []


@pytest.mark.slow
def test_loop_keeps_its_results_when_wall_timing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      small: None) -> None:
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))
    out = tmp_path / "run"
    # wall times run under the capture's interpreter, as captures do: here one that does not exist
    capture = dataclasses.replace(EAGER, python=str(tmp_path / "missing" / "python"))
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=out, budget=1, device="cpu", yardstick=False, wall_iters=2,
                                              capture=capture))
    assert (out / "optimize.json").is_file() and result.wall_time == {}
    assert len(result.notes) == 1 and "wall time not measured" in result.notes[0]
    assert "missing/python" in result.notes[0]


@pytest.mark.slow
def test_a_killed_wall_timing_leaves_the_loop_results_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              small: None) -> None:
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # what a timeout's signal does to a long timing run

    monkeypatch.setattr(loop, "_wall_times", killed)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        optimize(EXAMPLE, OptimizeConfig(out_dir=out, budget=1, device="cpu", yardstick=False, wall_iters=2,
                                         capture=EAGER))
    saved = json.loads((out / "optimize.json").read_text())
    assert saved["trials"] and saved["wall_time"] == {}
    assert (out / "comparison.json").is_file() and (out / "report.html").is_file()


@pytest.mark.slow
def test_timing_runs_load_the_caches_their_captures_compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             small: None) -> None:
    fake = FakeCapture([pair_profile("opt")])
    monkeypatch.setattr(trial_mod, "capture_profile", fake)
    timed: list[tuple[str, str | None]] = []

    def measure(workload: Path, **kwargs: object) -> WallTime:
        cache = kwargs["inductor_cache"]
        assert cache is None or isinstance(cache, Path)
        timed.append((Path(workload).name, cache.name if cache else None))
        return WallTime((2.0, 2.0) if Path(workload).name != "workload_optimized.py" else (1.0, 1.0))

    monkeypatch.setattr(walltime, "measure", measure)
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=2, device="cpu", yardstick=False,
                                              wall_iters=2, capture=EAGER))
    kept_trial = Path(next(t.run_dir for t in result.trials if t.outcome == "kept")).name  # type: ignore[arg-type]
    caches = [c.inductor_cache_dir for _, _, c in fake.calls]
    assert [c.name for c in caches] == ["baseline", Path(fake.calls[1][1]).parent.name]  # type: ignore[union-attr]
    assert len({c.parent for c in caches}) == 1  # type: ignore[union-attr]
    assert timed == [(EXAMPLE.name, "baseline"), ("workload_optimized.py", kept_trial)]
    assert not caches[0].parent.exists()  # type: ignore[union-attr]  # removed when the loop ends
    assert result.wall_speedup == pytest.approx(2.0)


def test_measure_names_a_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(ToolFailedError, match="cannot start"):
        measure(EXAMPLE, iters=1, warmup=0, compile_mode="eager", device="cpu", python=str(tmp_path / "python"))


def _fake_walls(monkeypatch: pytest.MonkeyPatch, first: list[WallTime], again: list[WallTime]) -> list[str]:
    """LoopState's wall times from lists: ``first`` for wall_of (cached per run), ``again`` for wall_again."""
    firsts, agains, timed = iter(first), iter(again), []

    def wall_of(self: object, run: Path) -> tuple[WallTime, float]:
        cache = self.walls  # type: ignore[attr-defined]
        if run not in cache:
            timed.append(f"first {run.name}")
            cache[run] = (next(firsts), 0.1)
        return cache[run]

    def wall_again(self: object, run: Path) -> WallTime:
        timed.append(f"again {run.name}")
        return next(agains)

    monkeypatch.setattr(trial_mod.LoopState, "wall_of", wall_of)
    monkeypatch.setattr(trial_mod.LoopState, "wall_again", wall_again)
    return timed


def test_a_plan_faster_on_the_gpu_but_slower_end_to_end_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    small: None) -> None:
    # the attention layer's kind of plan: kernels 8.7x faster, the host-bound step 0.51 -> 0.67 ms, twice
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    timed = _fake_walls(monkeypatch, [WallTime((0.50, 0.51, 0.52)), WallTime((0.66, 0.67, 0.68))],
                        [WallTime((0.65, 0.66, 0.69)), WallTime((0.49, 0.50, 0.53))])
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=1, device="cpu", yardstick=False,
                                              wall_iters=3, capture=EAGER))
    (tried,) = [t for t in result.trials if t.outcome != "skipped"]
    assert tried.outcome == "not_faster" and tried.judged_on == "kernel_time" and result.kept_passes == []
    assert (tried.best_wall_ms, tried.wall_ms) == (0.505, 0.665)  # both processes' iterations, pooled
    assert tried.reason.startswith("faster on the GPU but slower end to end: median 0.510 -> 0.670 ms")
    assert "again, the plan first: 0.500 -> 0.660 ms" in tried.reason
    kernel_us = f"{result.baseline_kernel_ns / 1e3:.1f} -> {tried.kernel_ns / 1e3:.1f} us"  # type: ignore[operator]
    assert f"profiled kernel time {kernel_us}" in tried.reason  # in us, as every other kernel time printed
    # each side timed once, then both again with the plan first; the baseline's figures stay the first ones
    assert [t.split()[0] for t in timed] == ["first", "first", "again", "again"]
    assert timed[2].endswith(tried.run_dir.rsplit("/", 1)[-1])
    assert result.wall_time["baseline"]["median_ms"] == 0.505 and result.wall_time["baseline"]["iterations"] == 6
    # on a CPU there is no graph pass to try next: cuda_graphs cannot apply, so nothing was queued
    assert not any(t.finding.startswith("host_bound:") for t in result.trials)


def test_a_refusal_the_second_timing_contradicts_leaves_kernel_time_to_decide(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None) -> None:
    # the H200 GPT-2 forward with bf16: 4.41 -> 6.19 ms in one pair of processes, 5.61 -> 3.87 in the next
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    _fake_walls(monkeypatch, [WallTime((4.39, 4.41, 4.44)), WallTime((6.15, 6.19, 6.22))],
                [WallTime((3.85, 3.87, 3.90)), WallTime((5.60, 5.61, 5.63))])
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=1, device="cpu", yardstick=False,
                                              wall_iters=3, capture=EAGER))
    (tried,) = [t for t in result.trials if t.outcome != "skipped"]
    assert tried.outcome == "kept" and result.kept_passes == [tried.transformation]
    (note,) = [n for n in result.notes if "disagree between process pairs" in n]
    assert "median 4.410 -> 6.190 ms; again, the plan first: 5.610 -> 3.870 ms" in note
    # the run's figures pool both processes of each side: within that noise, unchanged end to end
    assert (tried.best_wall_ms, tried.wall_ms) == (pytest.approx(5.02), pytest.approx(5.025))
    assert result.wall_time["optimized"]["iterations"] == 6


def test_a_host_bound_refusal_queues_the_graph_pass() -> None:
    from profiler_core.optimize.result import OptimizeResult
    from profiler_core.optimize.state import Candidate

    state = trial_mod.LoopState.__new__(trial_mod.LoopState)
    state.kept, state.cannot_apply, state.suggested = [], {}, [Candidate("channels_last", "kept:x")]
    state.result = OptimizeResult(workload="w.py", created_at="now", run_dir=".")
    trial_mod._graphs_first(state, "bf16_promotion")
    assert state.suggested[0] == Candidate("cuda_graphs", "host_bound:bf16_promotion")
    state.result.training, state.suggested = True, []
    trial_mod._graphs_first(state, "bf16_autocast")
    assert state.suggested == [Candidate("whole_step_cuda_graphs", "host_bound:bf16_autocast")]
    state.kept, state.suggested = ["whole_step_cuda_graphs"], []
    trial_mod._graphs_first(state, "fused_optimizer")
    assert state.suggested == []  # the graphs are kept already


def test_a_pass_a_kept_one_supersedes_is_skipped_at_no_cost(tmp_path: Path) -> None:
    from profiler_core.optimize.result import OptimizeResult
    from profiler_core.optimize.state import Candidate

    state = trial_mod.LoopState.__new__(trial_mod.LoopState)
    state.kept, state.cannot_apply, state.tried = ["bf16_autocast", "step_graph_capture"], {}, 0
    state.result = OptimizeResult(workload="w.py", created_at="now", run_dir=".")
    trial = trial_mod.run_trial(state, Candidate("whole_step_cuda_graphs", "kept:bf16_autocast"), None)  # type: ignore[arg-type]
    assert trial.outcome == "skipped" and state.tried == 0
    assert trial.reason == "cannot apply, not tried: step_graph_capture, kept, supersedes it"



def test_a_graph_pass_refused_on_wall_time_is_timed_again_and_pooled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None) -> None:
    # judged on the timeline (as cuda_graphs is): the first pair says not faster, the second pair
    # (plan first) says faster; the pooled iterations decide
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    monkeypatch.setattr(trial_mod, "_on_timeline", lambda state, candidate: True)
    timed = _fake_walls(monkeypatch, [WallTime((0.49, 0.50, 0.51)), WallTime((0.51, 0.52, 0.53))],
                        [WallTime((0.40, 0.41, 0.42)), WallTime((0.58, 0.59, 0.60))])
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=1, device="cpu", yardstick=False,
                                              wall_iters=3, capture=EAGER))
    (tried,) = [t for t in result.trials if t.outcome != "skipped"]
    assert tried.judged_on == "wall_time" and tried.outcome == "kept"
    assert "again, the plan first: 0.590 -> 0.410 ms; pooled 0.545 -> 0.465 ms" in tried.reason
    assert (tried.best_wall_ms, tried.wall_ms) == (pytest.approx(0.545), pytest.approx(0.465))
    assert [t.split()[0] for t in timed] == ["first", "first", "again", "again"]
