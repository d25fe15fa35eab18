"""manifest.json: round trip, atomic write, clear errors for broken or foreign files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.rundir.manifest import (
    MANIFEST_NAME,
    Artifacts,
    ClockRecord,
    CounterRecord,
    PhaseClocks,
    PhaseRecord,
    PhaseStatus,
    RunManifest,
    RunStatus,
    SpotCheckRecord,
    WorkloadRecord,
    read_manifest,
    write_manifest,
)
from profiler_core.schema import CounterAvailability, ToolVersions


def _manifest() -> RunManifest:
    return RunManifest(
        operator_profiler="0.1.0",
        created_at="2026-11-29T08:00:00Z",
        status=RunStatus.COMPLETE,
        workload=WorkloadRecord(
            path="/w/tiny_attention.py",
            sha256="ab" * 32,
            compile_mode="default",
            warmup_iterations=2,
            measured_iterations=2,
            device="cuda",
            seed=0,
            python="/usr/bin/python3",
        ),
        versions=ToolVersions(
            torch="2.11.0+cu130",
            cuda="13.0",
            driver="580.95.05",
            ncu="2025.3.1.0",
            nsys="2025.3.1.90",
            python="3.12.3",
        ),
        clocks=ClockRecord(policy="observe"),
        counters=CounterRecord(
            mode="per-config",
            replay_mode="kernel",
            launch_count=1,
            metrics={"dram_bytes_read": "dram__bytes_read.sum"},
            availability=[
                CounterAvailability(
                    field="dram_bytes_written",
                    ncu_name="dram__bytes_op_write.sum",
                    available=False,
                    reason="not on this chip",
                )
            ],
            spot_check_spread=SpotCheckRecord(
                samples_per_config=3,
                configs=14,
                configs_with_repeats=5,
                max_rel_deviation={"dram_bytes_read": 0.04, "l1_hit_rate": None},
            ),
        ),
        phases=[
            PhaseRecord(
                name="kineto",
                status=PhaseStatus.OK,
                command=["python", "-m", "h"],
                exit_status=0,
                duration_s=12.5,
                clocks=PhaseClocks(samples=120, sm_mhz_median=1980.0),
            )
        ],
        timeline_source="nsys",
        artifacts=Artifacts(kineto="kineto.json", timeline="timeline.sqlite", counters_csv="counters.csv"),
        warnings=["one"],
    )


def test_round_trip(tmp_path: Path) -> None:
    original = _manifest()
    path = write_manifest(tmp_path, original)
    assert path == tmp_path / MANIFEST_NAME
    back = read_manifest(tmp_path)
    assert back == original
    assert back.counters.spot_check_spread.max_rel_deviation["l1_hit_rate"] is None
    assert read_manifest(path) == original  # the file itself works too
    assert not [p for p in tmp_path.iterdir() if p.name != MANIFEST_NAME]  # no temp files left


def test_phase_lookup_returns_the_last_record() -> None:
    m = _manifest()
    m.phases.append(PhaseRecord(name="kineto", status=PhaseStatus.FAILED))
    assert m.phase("kineto").status is PhaseStatus.FAILED and m.phase("counters") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no capture manifest"),
        ("{not json", "unreadable manifest"),
        (json.dumps({"schema_version": 9}), "schema_version 9 is not supported"),
        (
            json.dumps({"schema_version": 1, "operator_profiler": "0.1.0"}),
            "invalid manifest, field 'created_at'",
        ),
    ],
    ids=["missing", "truncated", "future-version", "missing-field"],
)
def test_bad_manifests_name_the_problem(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / MANIFEST_NAME).write_text(content)
    with pytest.raises(ArtifactFormatError, match=message):
        read_manifest(tmp_path)


def test_unknown_field_is_rejected(tmp_path: Path) -> None:
    data = json.loads(_manifest().model_dump_json())
    data["surprise"] = 1
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(ArtifactFormatError, match="surprise"):
        read_manifest(tmp_path)
