"""read_kineto on real H200 torch.profiler traces, both parse paths, and broken files."""

from __future__ import annotations

import gzip
import io
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import kineto, kineto_stream, read_kineto
from profiler_core.ingest.kineto_events import us_to_ns
from profiler_core.records import KinetoTrace

BROKEN = Path(__file__).parent.parent / "data" / "broken"
_ARGS = {"stream": 7, "device": 0}


@pytest.fixture(scope="module")
def joinable_trace(joinable: Path) -> KinetoTrace:
    return read_kineto(joinable / "kineto.json")


@pytest.fixture(scope="module")
def raw_events(joinable: Path) -> tuple[int, list[dict]]:
    """The joinable trace as plain JSON, floats kept exact, to check the reader against."""
    doc = json.loads((joinable / "kineto.json").read_text(), parse_float=Decimal)
    return doc["baseTimeNanoseconds"], doc["traceEvents"]


def _use(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Force one reader: orjson on the whole file, framed blocks of 4 kB, or ijson tokens."""
    if mode != "whole":
        monkeypatch.setattr(kineto, "STREAM_THRESHOLD_BYTES", 0)
        monkeypatch.setattr(kineto_stream, "FRAME_BYTES", 4096 if mode == "framed" else 0)


MODES = ["whole", "framed", "ijson"]


@pytest.fixture(params=MODES)
def parse_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per reader."""
    _use(request.param, monkeypatch)
    return request.param


def test_joinable_counts(joinable_trace: KinetoTrace) -> None:
    assert len(joinable_trace.kernels) == 44
    assert {k.kind for k in joinable_trace.kernels} == {"kernel"}
    by_category = [op.category for op in joinable_trace.cpu_ops]
    assert by_category.count("cpu_op") == 42
    assert by_category.count("user_annotation") == 2
    assert {c.name for c in joinable_trace.runtime_calls} == {"cuLaunchKernel", "cudaLaunchKernelExC",
                                                                  "cudaDeviceSynchronize"}


def test_every_kernel_links_to_its_launch_and_its_op(joinable_trace: KinetoTrace) -> None:
    launches = {c.correlation_id: c for c in joinable_trace.runtime_calls}
    ops = {op.external_id: op for op in joinable_trace.cpu_ops}
    for kernel in joinable_trace.kernels:
        assert kernel.external_id is not None
        launch = launches[kernel.correlation_id]
        assert launch.external_id == kernel.external_id
        assert launch.start_ns < kernel.start_ns
        op = ops[kernel.external_id]
        assert op.start_ns <= launch.start_ns and launch.end_ns <= op.end_ns
        if kernel.name.startswith("triton_"):
            assert op.name == kernel.name  # Inductor names the launching op after its kernel
        else:
            assert op.name in {"aten::mm", "aten::bmm"}


@pytest.mark.parametrize(
    "name", ["triton_per_fused_native_layer_norm_0", "triton_poi_fused_addmm_relu_view_6"],
    ids=["layer_norm", "addmm_relu"],
)
def test_kernel_fields_match_the_file(
    joinable_trace: KinetoTrace, raw_events: tuple[int, list[dict]], name: str
) -> None:
    base_ns, events = raw_events
    raw = next(e for e in events if e.get("cat") == "kernel" and e["name"] == name)
    kernel = next(k for k in joinable_trace.kernels if k.name == name)
    args = raw["args"]
    assert kernel.grid == tuple(args["grid"]) and kernel.block == tuple(args["block"])
    assert kernel.registers_per_thread == args["registers per thread"]
    assert kernel.smem_bytes == args["shared memory"]
    assert (kernel.stream, kernel.device) == (args["stream"], args["device"])
    assert (kernel.correlation_id, kernel.external_id) == (args["correlation"], args["External id"])
    assert kernel.start_ns == base_ns + int(raw["ts"] * 1000)
    assert kernel.duration_ns == int(raw["dur"] * 1000)


def test_known_kernel_values(joinable_trace: KinetoTrace) -> None:
    first = joinable_trace.kernels[0]
    assert first.name == "triton_per_fused_native_layer_norm_0"
    assert (first.grid, first.block, first.registers_per_thread) == ((512, 1, 1), (64, 1, 1), 27)
    assert first.start_ns == 1_790_857_026_000_000_000 + 5_081_256_683_329_816
    assert first.duration_ns == 1_760


def test_all_times_are_exact_nanoseconds(
    joinable_trace: KinetoTrace, raw_events: tuple[int, list[dict]]
) -> None:
    base_ns, events = raw_events
    expected = sorted(
        (base_ns + int(e["ts"] * 1000), int(e["dur"] * 1000)) for e in events if e.get("cat") == "kernel"
    )
    assert [(k.start_ns, k.duration_ns) for k in joinable_trace.kernels] == expected


@given(st.integers(min_value=0, max_value=2**43 * 1000 - 1))
def test_us_to_ns_is_exact_wherever_a_double_can_be(ns: int) -> None:
    # Kineto prints microseconds with 3 decimals; below 2**43 us a double still resolves 1 ns.
    # Plain round(ts * 1000) is off by one for some of these (e.g. around 5e12 us, as in the traces).
    assert us_to_ns(float(f"{ns // 1000}.{ns % 1000:03d}")) == ns


def test_kernels_sorted_by_start(joinable_trace: KinetoTrace) -> None:
    starts = [k.start_ns for k in joinable_trace.kernels]
    assert starts == sorted(starts)


def test_cpu_op_shapes_and_types(joinable_trace: KinetoTrace) -> None:
    mm = next(op for op in joinable_trace.cpu_ops if op.external_id == 7)
    assert mm.name == "aten::mm"
    assert mm.input_shapes == ((512, 256), (256, 256), (512, 256))
    assert mm.input_types == ("float", "float", "float")
    norm = next(op for op in joinable_trace.cpu_ops if op.external_id == 6)
    assert norm.input_shapes == ((4, 128, 256), (256,), (256,), (4, 128, 256), (), ())
    assert norm.input_types == ("float", "float", "float", "float", "Scalar", "Scalar")
    annotation = next(op for op in joinable_trace.cpu_ops if op.category == "user_annotation")
    assert annotation.name.startswith("## Call CompiledFxGraph ")


def test_metadata(joinable_trace: KinetoTrace) -> None:
    meta = joinable_trace.metadata
    assert meta["baseTimeNanoseconds"] == 1_790_857_026_000_000_000
    assert meta["deviceProperties"][0]["name"] == "NVIDIA H200"
    assert (meta["schemaVersion"], meta["cuda_runtime_version"], meta["cupti_version"]) == (1, 13000, 130001)


def test_tiny_compiled_mlp(tiny: Path, parse_path: str) -> None:
    trace = read_kineto(tiny / "kineto_compiled_mlp.json")
    assert len(trace.kernels) == 10
    assert sum(k.name.startswith("triton_poi_fused_addmm_relu_0") for k in trace.kernels) == 2
    ops = {op.external_id for op in trace.cpu_ops}
    assert all(k.external_id in ops for k in trace.kernels)


@pytest.mark.parametrize("mode", ["framed", "ijson"])
@pytest.mark.parametrize("name", ["h200_joinable/kineto.json", "h200_tiny/kineto_compiled_mlp.json"],
                         ids=["joinable", "tiny"])
def test_streaming_gives_identical_records(
    data_dir: Path, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = read_kineto(data_dir / name)
    _use(mode, monkeypatch)
    streamed = read_kineto(data_dir / name)
    assert streamed.kernels == whole.kernels
    assert streamed.cpu_ops == whole.cpu_ops
    assert streamed.runtime_calls == whole.runtime_calls
    assert streamed.metadata == whole.metadata


def test_framing_cuts_the_real_trace_into_blocks(joinable: Path) -> None:
    with (joinable / "kineto.json").open("rb") as f:
        metadata, blocks = kineto_stream.framed_batches(f, 4096, kineto.METADATA_KEYS)
        sizes = [len(block) for block in blocks]
    assert len(sizes) > 10 and sum(sizes) == 288
    assert metadata["baseTimeNanoseconds"] == 1_790_857_026_000_000_000


def test_gzip(joinable: Path, tmp_path: Path, joinable_trace: KinetoTrace, parse_path: str) -> None:
    packed = tmp_path / "kineto.json.gz"
    with (joinable / "kineto.json").open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = read_kineto(packed)
    assert trace.kernels == joinable_trace.kernels
    assert trace.cpu_ops == joinable_trace.cpu_ops


def test_base_time_after_the_events(joinable: Path, tmp_path: Path, joinable_trace: KinetoTrace,
                                    parse_path: str) -> None:
    doc = json.loads((joinable / "kineto.json").read_text())
    reordered = {"traceEvents": doc.pop("traceEvents"), **doc}  # metadata after the events
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(reordered))
    assert read_kineto(path).kernels == joinable_trace.kernels


_PAD = "x" * 200  # pushes the look-alike separator past the head the reader inspects first


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"traceEvents": [{"ph": "X", "cat": "kernel"}, {"ph": "X"}]}', "not one per indented block"),
        ('{"a": {"traceEvents": [\n  {\n  }]}}', "not a JSON object prefix"),
        ('{"traceEvents": [\n  {\n    "pad": "' + _PAD + '",\n    "args": {"x": [\n  {\n  },\n  {\n  }]}'
         '\n  }\n]}', "a block is not a list of whole events"),
    ],
    ids=["compact", "nested-key", "nested-separator"],
)
def test_framing_refuses_other_layouts(text: str, why: str) -> None:
    """Layouts where a cut could land inside an event are refused, so ijson reads them instead."""
    assert json.loads(text)  # each is valid JSON
    with pytest.raises(kineto_stream.NotFramable, match=why):
        _metadata, blocks = kineto_stream.framed_batches(io.BytesIO(text.encode()), 64, kineto.METADATA_KEYS)
        list(blocks)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kineto_truncated.json", "truncated or corrupt"),
        ("kineto_not_a_trace.json", "not a torch.profiler Chrome trace"),
        ("kineto_empty.json", "no events"),
        ("kineto_cpu_only.json", "no GPU kernels; was the profiler run with ProfilerActivity.CUDA"),
        ("kineto_kernel_without_dur.json", "traceEvents[19] (kernel 'sm80_xmma_gemm"),
        ("missing.json", "no such Kineto trace"),
    ],
    ids=["truncated", "not-a-trace", "empty", "cpu-only", "event-without-dur", "missing"],
)
def test_broken_files(name: str, expected: str, parse_path: str) -> None:
    with pytest.raises(ArtifactFormatError) as caught:
        read_kineto(BROKEN / name)
    message = str(caught.value)
    assert str(BROKEN / name) in message
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"cat": "kernel", "name": "k", "ts": 1.0, "dur": 1.0}, "has no 'args'"),
        ({"cat": "kernel", "name": "k", "ts": "soon", "dur": 1.0, "args": _ARGS}, "soon"),
        ({"cat": "kernel", "name": "k", "ts": 1.0, "dur": 1.0, "args": {**_ARGS, "stream": "7"}},
         "integer stream"),
        ({"cat": "kernel", "name": "k", "ts": 1.0, "dur": 1.0, "args": {**_ARGS, "grid": [1]}}, "[x, y, z]"),
        ({"cat": "cpu_op", "name": "aten::mm", "ts": 1.0, "dur": 1.0}, "has no 'tid'"),
        ({"cat": "cuda_runtime", "name": 5, "ts": 1.0, "dur": 1.0, "tid": 1}, "string name"),
        ([1, 2], "is not a JSON object"),
    ],
    ids=["no-args", "text-ts", "text-stream", "short-grid", "no-tid", "numeric-name", "not-an-object"],
)
def test_malformed_event_names_its_index(
    tmp_path: Path, event: object, expected: str, parse_path: str
) -> None:
    good = {"ph": "X", "cat": "kernel", "name": "ok", "ts": 0.5, "dur": 1.0, "args": _ARGS}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [good, good, event]}))
    with pytest.raises(ArtifactFormatError, match=r"traceEvents\[2\]") as caught:
        read_kineto(path)
    assert expected in str(caught.value)
