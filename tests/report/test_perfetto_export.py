"""The Chrome trace export: valid JSON, one track per stream, operators enclosing their kernels."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run
from profiler_core.report import export_perfetto
from profiler_core.report.host_timeline import read_host_timeline
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


# ---------------------------------------------------------------- host threads, launch flows, counters

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"
HOST = 0x7FFF


def _export_with_host(run: Path) -> tuple[object, list[dict]]:
    profile = attribute_run(run)
    host = read_host_timeline(run, profile.capture.timeline_source)
    return profile, _events(export_perfetto(profile, host=host))


def _flow_pairs(events: list[dict]) -> list[tuple[dict, dict]]:
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    return [(starts[e["id"]], e) for e in events if e["ph"] == "f"]


def test_kineto_capture_host_threads_and_one_flow_per_launch() -> None:
    run = CAPTURES / "tv_resnet18" / "baseline"
    profile, events = _export_with_host(run)
    raw = json.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in raw if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    launched = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                and e["args"].get("correlation") in launches]
    pairs = _flow_pairs(events)
    assert len(pairs) == len(launched) == len(profile.kernels)  # type: ignore[attr-defined]
    host_slices = [e for e in events if e["ph"] == "X" and e["pid"] == HOST]
    assert {e["cat"] for e in host_slices} == {"cpu_op", "user_annotation", "cuda_runtime"}
    by_start = {(e["tid"], e["ts"]): e for e in host_slices if e["cat"] == "cuda_runtime"}
    for s, f in pairs:
        assert s["ts"] <= f["ts"] and f["pid"] == 1 and f["bp"] == "e"
        assert by_start[(s["tid"], s["ts"])]["name"].startswith(("cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpy",
                                                                 "cudaMemset"))
    # the raw gap from each launch to its kernel, in microseconds, is what the arrows span
    gaps = sorted(round(k["ts"] - launches[k["args"]["correlation"]]["ts"], 1) for k in launched)
    assert sorted(round(f["ts"] - s["ts"], 1) for s, f in pairs) == gaps
    _assert_nested(events)


def test_nsys_capture_host_is_the_nsys_process_and_flows_match_its_records() -> None:
    run = CAPTURES / "tv_resnet50" / "baseline_nsys"
    profile, events = _export_with_host(run)
    con = sqlite3.connect(f"file:{run / 'timeline.sqlite'}?mode=ro", uri=True)
    lo = min(k.start_ns for k in profile.kernels)  # type: ignore[attr-defined]
    hi = max(k.end_ns for k in profile.kernels)  # type: ignore[attr-defined]
    (reference,) = con.execute(
        "SELECT COUNT(*) FROM (SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_MEMSET) a WHERE a.start BETWEEN ? AND ? AND "
        "a.correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)", (lo, hi)).fetchone()
    assert len(_flow_pairs(events)) == reference == 300
    cats = {e["cat"] for e in events if e["ph"] == "X" and e["pid"] == HOST}
    assert cats == {"nvtx", "cuda_runtime"}
    _assert_nested(events)


def test_counter_tracks_follow_each_kernel() -> None:
    run = CAPTURES / "tv_resnet18" / "baseline"
    profile, events = _export_with_host(run)
    counters = [e for e in events if e["ph"] == "C"]
    t0 = min(e["ts"] for e in events if e["ph"] in ("X", "s"))
    assert t0 == 0
    first = min((e for e in events if e["ph"] == "X" and e["pid"] == 1), key=lambda e: e["ts"])
    shift = first["ts"]  # the first kernel's time on the trace's clock (the first launch is 0)
    k0 = min(profile.kernels, key=lambda k: k.start_ns)  # type: ignore[attr-defined]
    at = {(e["name"], e["ts"]): e["args"] for e in counters}
    measured = [kern for kern in profile.kernels  # type: ignore[attr-defined]
                if kern.counters.get("achieved_occupancy_pct") is not None]
    assert measured
    for kern in measured:
        ts = round(shift + (kern.start_ns - k0.start_ns) / 1000, 3)
        occupancy = at[(f"stream {kern.stream} counters", ts)]["occupancy %"]
        assert occupancy == round(kern.counters["achieved_occupancy_pct"], 3)
    assert any(all(v == 0 for v in args.values()) for args in at.values())  # the gaps read zero


def test_perfetto_trace_processor_reads_tracks_flows_and_counters(tmp_path: Path) -> None:
    """Loaded by Perfetto's own trace processor: needs the ``perfetto`` package and its
    ``trace_processor_shell`` binary named by OPROF_TRACE_PROCESSOR (it is a download the package
    makes on first use; machines without that network skip this)."""
    import os

    binary = os.environ.get("OPROF_TRACE_PROCESSOR")
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    if not binary or not Path(binary).is_file():
        pytest.skip("set OPROF_TRACE_PROCESSOR to a trace_processor_shell binary")
    run = CAPTURES / "tv_resnet18" / "baseline"
    profile, events = _export_with_host(run)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    tp = tp_mod.TraceProcessor(trace=str(path), config=tp_mod.TraceProcessorConfig(bin_path=binary))
    try:
        def one(sql: str) -> int:
            return int(next(iter(tp.query(sql))).n)

        assert one("select count(*) as n from flow") == len(_flow_pairs(events))
        assert one("select count(*) as n from slice") == sum(1 for e in events if e["ph"] == "X")
        assert one("select count(*) as n from counter") > 0
        assert one("select count(distinct utid) as n from thread_track") >= 2  # a host thread and a stream
    finally:
        tp.close()


def test_a_broken_host_trace_leaves_the_gpu_side_and_says_why(tmp_path: Path) -> None:
    import shutil

    from profiler_core import api

    run = tmp_path / "run"
    shutil.copytree(CAPTURES / "tv_resnet18" / "baseline", run)
    profile = attribute_run(run)
    (run / "kineto.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "cat": "kernel"'))
    trace = json.loads(api.report(profile, findings=False).perfetto(run_dir=run))
    assert trace["otherData"]["host"] is None and "kineto" in trace["otherData"]["host_missing"]
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X") == 250  # kernels and operators, as without host
