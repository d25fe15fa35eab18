"""profile.json validated on read: a hostile corpus and a seeded fuzz of the real golden profile.

Every input either loads or raises ``SchemaError`` naming the file (never another exception,
never a silently wrong profile); the untouched real file loads; some mutations (a changed
kernel name) must still load, so the checks are not simply refusing everything.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiler_core.errors import SchemaError
from profiler_core.profile_io import read_profile

REAL = Path(__file__).resolve().parent / "data" / "h200_joinable" / "expected" / "profile.json"


def _edited(edit: Callable[[dict[str, Any]], None]) -> bytes:
    doc = json.loads(REAL.read_text())
    edit(doc)
    return json.dumps(doc).encode()


def _op(doc: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in doc["operators"] if o["kernel_ids"])


CORPUS: dict[str, tuple[bytes | Callable[[], bytes], str]] = {
    "empty-object": (b"{}", "no schema_version"),
    "a-list": (b"[]", "not a profile object"),
    "schema-version-true": (lambda: _edited(lambda d: d.update(schema_version=True)), "schema_version True"),
    "schema-version-string": (lambda: _edited(lambda d: d.update(schema_version="1")), "schema_version '1'"),
    "no-kernels": (b'{"schema_version": 1}', "holds no kernels"),
    "infinity": (lambda: _edited(lambda d: None).replace(b'"duration_ns": ', b'"duration_ns": Infinity, "x": ', 1),
                 "not valid JSON"),
    "nan": (lambda: _edited(lambda d: None).replace(b'"start_ns": ', b'"start_ns": NaN, "x": ', 1),
            "not valid JSON"),
    "5000-digit-int": (b'{"schema_version": 1, "kernels": [' + b"9" * 5000 + b"]}", "not valid JSON"),
    "nested-100k": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    "dangling-kernel-id": (lambda: _edited(lambda d: _op(d)["kernel_ids"].append(10**6)), "lists kernel 1000000"),
    "negative-duration": (lambda: _edited(lambda d: d["kernels"][0].update(duration_ns=-5)), "or equal to 0"),
    "end-before-start": (lambda: _edited(lambda d: d["kernels"][0].update(end_ns=d["kernels"][0]["start_ns"] - 1)),
                         "before it starts"),
    "duration-not-end-minus-start": (lambda: _edited(lambda d: d["kernels"][0].update(
        duration_ns=d["kernels"][0]["duration_ns"] + 1)), "differs from end_ns - start_ns"),
    "operator-duration-inconsistent": (lambda: _edited(lambda d: _op(d).update(duration_ns=_op(d)["duration_ns"] * 2)),
                                       "not the sum of its kernels"),
    "duplicate-kernel-id": (lambda: _edited(lambda d: d["kernels"].append(d["kernels"][0])), "appears twice"),
    "unknown-operator-key": (lambda: _edited(lambda d: d["kernels"][0]["attribution"].update(operator_key="nope#0")),
                             "which the profile does not list"),
    "coverage-inconsistent": (lambda: _edited(lambda d: d["coverage"].update(kernel_count=1)), "coverage says"),
    "absurd-duration": (lambda: _edited(lambda d: d["kernels"][0].update(
        duration_ns=10**15, end_ns=d["kernels"][0]["start_ns"] + 10**15)), "2.8 hours"),
    "huge-float-for-int": (
        lambda: _edited(lambda d: None).replace(b'"kernel_count": ', b'"kernel_count": 1e400, "y": ', 1),
        "not valid JSON"),
}


def test_the_real_profile_is_accepted() -> None:
    assert len(read_profile(REAL).kernels) == 44


@pytest.mark.parametrize("case", list(CORPUS), ids=list(CORPUS))
def test_hostile_profiles_are_refused_by_name(tmp_path: Path, case: str) -> None:
    content, match = CORPUS[case]
    bad = tmp_path / "profile.json"
    bad.write_bytes(content() if callable(content) else content)
    with pytest.raises(SchemaError, match=match) as info:
        read_profile(bad)
    assert str(bad) in str(info.value)


def _mutations(raw: bytes, rng: random.Random, count: int) -> list[tuple[str, bytes]]:
    out = []
    alphabet = b'0123456789-.eE"{}[],: ntfaNI'
    for i in range(count):
        data = bytearray(raw)
        kind = rng.choice(["flip", "delete", "duplicate", "truncate", "number", "rename"])
        pos = rng.randrange(len(data))
        if kind == "flip":
            data[pos] = rng.choice(alphabet)
        elif kind == "delete":
            del data[pos:pos + rng.randint(1, 40)]
        elif kind == "duplicate":
            data[pos:pos] = data[pos:pos + rng.randint(1, 200)]
        elif kind == "truncate":
            del data[pos:]
        elif kind == "number":
            digits = [j for j in range(len(data)) if chr(data[j]).isdigit()]
            j = rng.choice(digits)
            data[j:j + 1] = rng.choice([b"-", b"99999999999999999999", b"0", b"1e308"])
        else:  # a kernel name changed: still a valid, consistent profile
            at = raw.index(b'"name": "', rng.randrange(len(raw) // 2)) + len(b'"name": "')
            data[at] = ord("Z")
        out.append((f"{i}-{kind}", bytes(data)))
    return out


def test_reader_fuzz_raises_only_schema_errors(tmp_path: Path) -> None:
    raw = REAL.read_bytes()
    accepted = refused = 0
    for name, data in _mutations(raw, random.Random(16), 300):
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        try:
            read_profile(path)
            accepted += 1
        except SchemaError as err:
            assert str(path) in str(err)
            refused += 1
    assert accepted > 10 and refused > 100, (accepted, refused)
