"""The Chrome trace export: valid JSON, one track per stream, operators enclosing their kernels."""

from __future__ import annotations

import json
from collections import defaultdict

from profiler_core.report import export_perfetto
from profiler_core.schema import Profile
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile


def _events(trace: dict) -> list[dict]:
    return json.loads(json.dumps(trace))["traceEvents"]


def _assert_nested(events: list[dict]) -> None:
    """Per track, complete events in file order must nest (integer ns, no partial overlap)."""
    by_track: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    for track in by_track.values():
        stack: list[int] = []
        for e in track:
            start, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"{e['name']} overlaps its enclosing slice"
            stack.append(end)


def test_real_profile_trace_structure() -> None:
    prof = pair_profile("base")
    events = _events(export_perfetto(prof))
    meta = [e for e in events if e["ph"] == "M"]
    assert {(e["name"], e["args"].get("name")) for e in meta if e["name"].endswith("_name")} == {
        ("process_name", "GPU 0 (NVIDIA H200)"), ("thread_name", "stream 7")}
    kernels = [e for e in events if e["ph"] == "X" and e["cat"].startswith("kernel")]
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "operator"]
    assert len(kernels) == 44 and len(ops) == 34
    first = min(prof.kernels, key=lambda x: x.start_ns)
    for e, kern in zip(kernels, sorted(prof.kernels, key=lambda x: x.start_ns), strict=True):
        assert e["ts"] == round((kern.start_ns - first.start_ns) / 1000, 3)  # microseconds
        assert e["dur"] == round(kern.duration_ns / 1000, 3)
        assert e["args"]["kernel"] == kern.name and e["name"] == e["args"]["operator"]
        assert e["args"]["tier"] == "cupti_correlation" and "tensor_core_active_pct" in e["args"]
    mm = next(e for e in ops if e["name"] == "aten::mm#0")
    assert mm["args"]["kernels"] == 2 and mm["args"]["op_class"] == "gemm"
    _assert_nested(events)


def _interleaved() -> Profile:
    b = ProfileBuilder()
    b.op("aten::a", k("kernel_a", 2))
    b.op("aten::b", k("kernel_b", 2))
    b.op("aten::c", k("kernel_a2", 2))
    b.unattributed(k("mystery<float>", 1, stream=9))
    prof = b.build()
    a, _b, c = prof.operators
    a.kernel_ids.append(c.kernel_ids[0])  # aten::a launches kernels 0 and 2, around aten::b's
    prof.kernels[2].attribution.operator_key = a.key
    prof.operators.remove(c)
    return prof


def test_interleaved_operator_gets_one_slice_per_run() -> None:
    events = _events(export_perfetto(_interleaved()))
    names = [e["name"] for e in events if e["ph"] == "X" and e["cat"] == "operator"]
    assert sorted(names) == ["aten::a#0 (part 1/2)", "aten::a#0 (part 2/2)", "aten::b#0"]
    _assert_nested(events)


def test_unattributed_kernel_on_its_own_stream_track() -> None:
    events = _events(export_perfetto(_interleaved()))
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {7: "stream 7", 9: "stream 9"}
    (mystery,) = [e for e in events if e["ph"] == "X" and e["tid"] == 9]
    assert mystery["name"] == "mystery<float>" and mystery["cat"] == "kernel,unattributed"
    assert mystery["args"]["operator"] is None and mystery["args"]["reason"]


def test_empty_profile_exports_an_empty_trace() -> None:
    assert export_perfetto(Profile())["traceEvents"] == []
