"""Per-config spread: how far K samples of one launch configuration disagree, per counter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from profiler_core.capture.spot_check import counter_spread
from profiler_core.ingest import read_ncu
from profiler_core.records import CounterRow

NAMES = {"dram_bytes_read": "dram__bytes_read.sum", "l1_hit_rate": "l1tex__t_sector_hit_rate.pct"}


def _row(name: str, grid: tuple[int, int, int], dram: float | None, l1: float | None) -> CounterRow:
    return CounterRow(
        ncu_id=0,
        name=name,
        grid=grid,
        block=(128, 1, 1),
        stream=7,
        device=0,
        metrics={"dram__bytes_read.sum": dram, "l1tex__t_sector_hit_rate.pct": l1},
    )


def test_spread_is_the_worst_relative_deviation_from_a_config_mean() -> None:
    rows = [
        _row("a", (1, 1, 1), 100, 50),
        _row("a", (1, 1, 1), 110, 50),
        _row("b", (2, 1, 1), 50, 0),
        _row("b", (2, 1, 1), 50, 0),
        _row("c", (3, 1, 1), 7, 7),
    ]  # a single sample has no spread
    spread = counter_spread(rows, NAMES, samples_per_config=2)
    assert (spread.configs, spread.configs_with_repeats) == (3, 2)
    assert spread.max_rel_deviation["dram_bytes_read"] == pytest.approx(5 / 105)
    assert spread.worst_config["dram_bytes_read"].startswith("a grid (1, 1, 1)")
    assert spread.max_rel_deviation["l1_hit_rate"] == 0.0


def test_spread_around_zero_is_undefined_not_guessed() -> None:
    rows = [_row("a", (1, 1, 1), 0, 10), _row("a", (1, 1, 1), 0, -10)]
    spread = counter_spread(rows, NAMES, samples_per_config=2)
    assert spread.max_rel_deviation["l1_hit_rate"] is None and "l1_hit_rate" not in spread.worst_config
    assert spread.max_rel_deviation["dram_bytes_read"] == 0.0


def test_missing_values_are_skipped() -> None:
    rows = [_row("a", (1, 1, 1), 100, None), _row("a", (1, 1, 1), 120, None)]
    spread = counter_spread(rows, NAMES, samples_per_config=2)
    assert spread.max_rel_deviation["dram_bytes_read"] == pytest.approx(10 / 110)
    assert spread.max_rel_deviation["l1_hit_rate"] is None


def test_real_rows_sampled_twice(joinable: Path) -> None:
    """The full report's two iterations are two samples of every launch configuration."""
    rows = list(read_ncu(joinable / "ncu_full_raw.csv").rows)
    names = {
        "dram_bytes_read": "dram__bytes_read.sum",
        "sm_active_cycles": "sm__cycles_active.sum",
        "registers_per_thread": "launch__registers_per_thread",
    }
    spread = counter_spread(rows, names, samples_per_config=2)
    assert (
        spread.configs == len({(r.name, r.grid, r.block) for r in rows}) and spread.configs_with_repeats > 0
    )
    assert spread.max_rel_deviation["registers_per_thread"] == 0.0  # a launch constant never varies
    assert 0.0 < spread.max_rel_deviation["sm_active_cycles"] < 1.0
    # one sample at three times its twin: 50% from the mean of the two
    tripled = [
        dataclasses.replace(
            rows[0],
            metrics={
                **rows[0].metrics,
                "sm__cycles_active.sum": rows[0].metrics["sm__cycles_active.sum"] * 3,
            },
        )
    ] + rows[1:]
    assert counter_spread(tripled, names, 2).max_rel_deviation["sm_active_cycles"] > 0.4
