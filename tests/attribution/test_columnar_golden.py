"""The columnar engine against the object engine it replaced, byte for byte, on every shipped capture.

Small captures: profile.json identical to the object engine's. The columnar form (forced with
``columnar_above=0``): profile.json + Parquet, read back and turned into the row form, identical
again. A truncated or missing Parquet table is a named error.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run, engine
from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.attribution.sources import capture_meta_from_manifest
from profiler_core.errors import ArtifactFormatError, SchemaError
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.rundir import find_run_artifacts
from profiler_core.schema import Profile, read_profile, write_profile
from tests.attribution import object_engine

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "examples" / "captures" / "h200").glob("*/*/manifest.json"))
IDS = [f"{r.parent.name}/{r.name}" for r in RUNS]


def _inputs(run: Path) -> dict:
    art = find_run_artifacts(run)
    try:
        ind = read_inductor(art.inductor) if art.inductor else None
    except ArtifactFormatError:
        ind = None  # attribute_run goes on without them too (inductor_optional)
    return {"kineto": read_kineto(art.kineto) if art.kineto else None,
            "nsys": read_nsys(art.nsys) if art.nsys else None, "ncu": read_ncu(art.ncu) if art.ncu else None,
            "inductor": ind, "capture": capture_meta_from_manifest(art.manifest, run)}


def _json(profile: Profile) -> bytes:
    return profile.__pydantic_serializer__.to_json(profile, indent=1)


def _rows(profile: Profile) -> Profile:
    """A profile read in its columnar form, as the row form (kernels as models, no table pointer)."""
    return profile.model_copy(update={"kernels": list(profile.kernels), "kernel_table": None})


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_columnar_engine_matches_the_object_engine_byte_for_byte(run: Path, tmp_path: Path) -> None:
    inputs = _inputs(run)
    expected = _json(object_engine.attribute(**inputs))
    rows = engine.attribute(**inputs)
    assert isinstance(rows.kernels, list)
    assert _json(rows) == expected
    columnar = engine.attribute(**inputs, columnar_above=0)
    assert isinstance(columnar.kernels, KernelTable)
    write_profile(tmp_path / "profile.json", columnar)
    assert (tmp_path / "profile.kernels.parquet").is_file()
    back = read_profile(tmp_path / "profile.json")
    assert isinstance(back.kernels, KernelTable) and back.kernel_table is not None
    assert _json(_rows(back)) == expected


def test_run_with_module_paths_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = ROOT / "tests" / "data" / "cpu_modules"
    if not (run / "manifest.json").is_file():
        run = next(r for r in RUNS if r.name == "baseline")
    expected = _json(attribute_run(run))
    monkeypatch.setenv(engine.COLUMNAR_ENV, "0")
    columnar = attribute_run(run)
    assert isinstance(columnar.kernels, KernelTable)
    write_profile(tmp_path / "profile.json", columnar)
    assert _json(_rows(read_profile(tmp_path / "profile.json"))) == expected


def test_threshold_is_configurable_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.COLUMNAR_ENV, "12")
    assert engine.columnar_threshold() == 12
    monkeypatch.setenv(engine.COLUMNAR_ENV, "many")
    with pytest.raises(Exception, match="OPROF_COLUMNAR_KERNELS"):
        engine.columnar_threshold()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("columnar") / "profile.json"
    inputs = _inputs(next(r for r in RUNS if r.parent.name == "gpt2" and r.name == "baseline"))
    write_profile(out, engine.attribute(**inputs, columnar_above=0))
    return out


def _copy(written: Path, tmp_path: Path) -> tuple[Path, Path]:
    for f in written.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "profile.json", tmp_path / "profile.kernels.parquet"


def test_truncated_parquet_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2])
    with pytest.raises(SchemaError, match=r"profile\.kernels\.parquet.*truncated"):
        read_profile(profile)


def test_damaged_parquet_of_the_right_size_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    data = bytearray(table.read_bytes())
    data[-6:] = b"XXXXXX"  # the footer's length and magic
    table.write_bytes(bytes(data))
    with pytest.raises(SchemaError, match="not a readable Parquet kernel table"):
        read_profile(profile)


def test_missing_parquet_is_a_named_error(written: Path, tmp_path: Path) -> None:
    profile, table = _copy(written, tmp_path)
    table.unlink()
    with pytest.raises(SchemaError, match="is missing"):
        read_profile(profile)


def test_no_temp_files_are_left_and_the_json_names_the_table(written: Path) -> None:
    names = sorted(p.name for p in written.parent.iterdir())
    assert names == ["profile.json", "profile.kernels.parquet"]
    assert b'"kernels":[]' in written.read_bytes() and b'"kernel_table":{"format":"parquet"' in written.read_bytes()
