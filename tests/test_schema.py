"""profile.json schema: the committed JSON Schema is current; read/write validate and are atomic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler_core.errors import OutputError, SchemaError
from profiler_core.profile_io import read_profile, write_profile
from profiler_core.schema import (
    SCHEMA_PATH,
    Attribution,
    Confidence,
    Coverage,
    Kernel,
    Operator,
    Profile,
    Tier,
    profile_json_schema,
)


def _kernel(i: int = 0) -> Kernel:
    return Kernel(
        id=i, name="triton_poi_fused_add_0", stream=7, device=0, start_ns=100, end_ns=250,
        duration_ns=150, attribution=Attribution(
            operator_key="aten::add#0", tier=Tier.CUPTI_CORRELATION, confidence=Confidence.HIGH),
    )


def _consistent(*kernels: Kernel) -> Profile:
    """A profile whose operator and coverage agree with its kernels (read_profile checks that)."""
    op = Operator(key="aten::add#0", name="aten::add", call_index=0, kernel_ids=[k.id for k in kernels],
                  kernel_count=len(kernels), duration_ns=sum(k.duration_ns for k in kernels))
    return Profile(kernels=list(kernels), operators=[op],
                   coverage=Coverage(kernel_count=len(kernels), duration_ns=op.duration_ns))


def test_committed_schema_is_current() -> None:
    committed = json.loads(SCHEMA_PATH.read_text())
    assert committed == profile_json_schema(), (
        "profile.schema.json is stale: run python -m profiler_core.schema_export"
    )


def test_round_trip(tmp_path: Path) -> None:
    prof = _consistent(_kernel(0), _kernel(1))
    out = write_profile(tmp_path / "p.json", prof)
    back = read_profile(out)
    assert back == prof
    assert back.kernels[1].attribution.tier is Tier.CUPTI_CORRELATION
    assert not list(tmp_path.glob(".*.tmp")), "temp file left behind"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"schema_version": 1, "kernels": [{"id": "x"}]}', "kernels.0"),
        (b'{"schema_version": 1, "kernels": [', "not valid JSON"),
        (b'{"schema_version": 7}', "schema_version 7"),
        (b'{"schema_version": 1, "bogus": 1}', "bogus"),
    ],
    ids=["bad-field", "truncated", "future-version", "unknown-field"],
)
def test_bad_profiles_name_the_problem(tmp_path: Path, content: bytes, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(SchemaError, match="bad.json") as info:
        read_profile(bad)
    assert needle in str(info.value)


def test_missing_profile(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="oprof attribute"):
        read_profile(tmp_path / "nope.json")


def test_failed_write_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "p.json"
    target.write_text("old")

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OutputError, match="p.json: cannot write"):
        write_profile(target, Profile())
    assert target.read_text() == "old"
    assert not list(tmp_path.glob(".*.tmp"))


def test_construct_trusted_matches_model_construct() -> None:
    from profiler_core.schema import construct_trusted

    fast = construct_trusted(Kernel, dict(_kernel(3).__dict__))
    slow = Kernel.model_construct(**_kernel(3).model_dump())
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_fields_set == slow.model_fields_set


def test_trusted_models_share_one_fields_set_and_stay_independent() -> None:
    from profiler_core.schema import construct_trusted

    a = construct_trusted(Kernel, dict(_kernel(3).__dict__))
    b = construct_trusted(Kernel, dict(_kernel(4).__dict__))
    assert a.model_fields_set is b.model_fields_set  # every field named: one set for the class
    assert a.model_fields_set == set(Kernel.model_fields)
    a.name = "renamed"  # assignment adds a name the set holds already
    c = a.model_copy(update={"stream": 99})  # a copy gets a set of its own
    assert b.name != "renamed" and b.model_fields_set == set(Kernel.model_fields)
    assert c.model_fields_set is not a.model_fields_set and c.stream == 99 and b.stream != 99
    assert set(b.model_dump(exclude_unset=True)) == set(Kernel.model_fields)
    partial = dict(_kernel(5).__dict__)
    del partial["stream"]  # not every field: a set of its own, naming what is set
    p = construct_trusted(Kernel, partial)
    assert p.model_fields_set == set(partial) and p.model_fields_set is not a.model_fields_set


REAL_PROFILE = Path(__file__).parent / "data" / "h200_joinable" / "expected" / "profile.json"


def test_schema_declares_its_dialect_and_id() -> None:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("https://") and schema["$id"].endswith("profile.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(REAL_PROFILE.read_text()), schema)  # a real H200 profile fits it


def _mutated(tmp_path: Path, change) -> tuple[Path, dict]:
    data = json.loads(REAL_PROFILE.read_text())
    change(data)
    out = tmp_path / "profile.json"
    out.write_text(json.dumps(data))
    return out, data


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d["kernels"][0].update(duration_ns=-5), "kernels.0.duration_ns"),
    (lambda d: d["kernels"][0].update(grid=[0, 1, 1]), "kernels.0.grid.0"),
    (lambda d: d["operators"][0].update(kernel_count=-1), "operators.0.kernel_count"),
    (lambda d: d["coverage"].update(attributed_time_pct=140.0), "coverage.attributed_time_pct"),
], ids=["negative-duration", "zero-grid", "negative-count", "percent-over-100"])
def test_bounds_are_in_the_schema_and_the_reader(tmp_path: Path, change, needle: str) -> None:
    import jsonschema

    path, data = _mutated(tmp_path, change)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    with pytest.raises(SchemaError, match="invalid profile") as info:
        read_profile(path)
    assert needle in str(info.value)


def _dangle_key(d: dict) -> None:
    d["kernels"][0]["attribution"]["operator_key"] = "aten::nothing#9"


def _dangle_kernel(d: dict) -> None:
    d["operators"][0]["kernel_ids"].append(10**9)


def _duplicate_operator(d: dict) -> None:
    d["operators"].append(d["operators"][0])


def _backwards(d: dict) -> None:
    d["kernels"][0]["end_ns"] = d["kernels"][0]["start_ns"] - 1


@pytest.mark.parametrize(("change", "needle"), [
    (_dangle_key, "attributed to operator 'aten::nothing#9', which the profile does not list"),
    (_dangle_kernel, "lists kernel 1000000000, which the profile does not list"),
    (_duplicate_operator, "appears twice"),
    (_backwards, "before it starts"),
], ids=["dangling-operator-key", "dangling-kernel-id", "duplicate-key", "ends-before-start"])
def test_references_are_checked_beyond_json_schema(tmp_path: Path, change, needle: str) -> None:
    import jsonschema

    path, data = _mutated(tmp_path, change)
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))  # JSON Schema cannot see these
    with pytest.raises(SchemaError, match="re-run 'oprof attribute'") as info:
        read_profile(path)
    assert needle in str(info.value)
