"""read_nsys on real H200 Nsight Systems exports, schema variants, and broken files."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_kineto, read_nsys
from profiler_core.records import NsysTimeline, NvtxRange, TimelineKernel

BROKEN = Path(__file__).parent.parent / "data" / "broken"


@pytest.fixture(scope="module")
def timeline(joinable: Path) -> NsysTimeline:
    return read_nsys(joinable / "nsys.sqlite")


@pytest.fixture
def export_copy(joinable: Path, tmp_path: Path) -> Path:
    """A writable copy of the joinable export, for schema variants."""
    path = tmp_path / "nsys.sqlite"
    shutil.copyfile(joinable / "nsys.sqlite", path)
    return path


def _edit(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()


def _innermost(ranges: list[NvtxRange], tid: int, at_ns: int) -> NvtxRange:
    enclosing = [r for r in ranges if r.tid == tid and r.start_ns <= at_ns <= r.end_ns]
    return min(enclosing, key=lambda r: r.end_ns - r.start_ns)


def test_joinable_counts(timeline: NsysTimeline) -> None:
    assert len(timeline.kernels) == 44
    assert {k.kind for k in timeline.kernels} == {"kernel"}
    assert len(timeline.nvtx_ranges) == 44
    assert timeline.warnings == []
    assert {c.name for c in timeline.runtime_calls} == {
        "cuProfilerStart", "cudaDeviceSynchronize", "cuLaunchKernel", "cudaLaunchKernelExC"
    }


def test_known_kernel_values(timeline: NsysTimeline) -> None:
    first = timeline.kernels[0]
    assert first.name == first.short_name == "triton_per_fused_native_layer_norm_0"
    assert (first.start_ns, first.end_ns, first.stream, first.device) == (14459713, 14461473, 7, 0)
    assert (first.grid, first.block, first.registers_per_thread) == ((512, 1, 1), (64, 1, 1), 27)
    assert (first.static_smem_bytes, first.dynamic_smem_bytes, first.smem_bytes) == (0, 8, 8)
    gemm = timeline.kernels[1]
    assert gemm.name.startswith("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8")
    assert (gemm.grid, gemm.block, gemm.smem_bytes) == ((8, 4, 4), (128, 1, 1), 13056)


def test_every_kernel_has_its_launch(timeline: NsysTimeline) -> None:
    launches = {c.correlation_id: c for c in timeline.runtime_calls}
    for kernel in timeline.kernels:
        launch = launches[kernel.correlation_id]
        assert launch.name in {"cuLaunchKernel", "cudaLaunchKernelExC"}
        assert launch.start_ns < kernel.start_ns


def test_launches_sit_inside_their_nvtx_ranges(timeline: NsysTimeline) -> None:
    """emit_nvtx wraps each launch: Triton kernels in a range named after them, GEMMs in aten::mm/bmm."""
    launches = {c.correlation_id: c for c in timeline.runtime_calls}
    for kernel in timeline.kernels:
        launch = launches[kernel.correlation_id]
        text = _innermost(timeline.nvtx_ranges, launch.tid, launch.start_ns).text
        if kernel.name.startswith("triton_"):
            assert text.startswith(f"{kernel.name}, op_id = ")
        else:
            assert re.match(r"aten::b?mm, op_id = \d+, sizes = \[", text)


def test_nvtx_ranges(timeline: NsysTimeline) -> None:
    texts = [r.text for r in timeline.nvtx_ranges]
    assert sum(bool(re.fullmatch(r"## Call CompiledFxGraph \w+ ##, op_id = \d+", t)) for t in texts) == 2
    assert "aten::mm, op_id = 7, sizes = [[512, 256], [256, 256], [512, 256]], input_op_ids = " \
           "[(0,-1), (0,-1), (0,-1)]" in texts
    assert all(r.domain is None and r.end_ns >= r.start_ns for r in timeline.nvtx_ranges)
    assert len({r.tid for r in timeline.nvtx_ranges}) == 1


def test_gpus(timeline: NsysTimeline) -> None:
    (gpu,) = timeline.gpus
    assert (gpu["name"], gpu["smCount"], gpu["chipName"]) == ("NVIDIA H200", 132, "GH100")
    assert (gpu["computeMajor"], gpu["computeMinor"]) == (9, 0)


def test_agrees_with_kineto_kernel_for_kernel(joinable: Path, timeline: NsysTimeline) -> None:
    """Same compiled workload, separate runs: names, order, grid and block agree per stream."""
    trace = read_kineto(joinable / "kineto.json")

    def per_stream(kernels: list[TimelineKernel]) -> dict[int, list[tuple]]:
        streams: dict[int, list[tuple]] = defaultdict(list)
        for k in kernels:
            streams[k.stream].append((k.name, k.grid, k.block, k.registers_per_thread, k.smem_bytes))
        return dict(streams)

    assert per_stream(timeline.kernels) == per_stream(trace.kernels)


def test_tiny_eager_export(tiny: Path) -> None:
    timeline = read_nsys(tiny / "nsys_eager_mlp_ln.sqlite")
    kinds = [k.kind for k in timeline.kernels]
    assert (kinds.count("kernel"), kinds.count("memcpy"), kinds.count("memset")) == (36, 6, 5)
    copy = next(k for k in timeline.kernels if k.kind == "memcpy")
    assert (copy.name, copy.bytes_moved) == ("CUDA memcpy Host-to-Device", 2097152)
    assert {k.name for k in timeline.kernels if k.kind == "memset"} == {"CUDA memset"}
    scal = next(k for k in timeline.kernels if k.short_name == "scal_kernel")
    assert scal.name.startswith("void scal_kernel<float, float, (int)1")  # demangled name wins
    texts = [r.text for r in timeline.nvtx_ranges]
    assert len(texts) == 38 and "aten::addmm, seq = 19, op_id = 5" in texts
    launches = {c.correlation_id for c in timeline.runtime_calls}
    assert all(k.correlation_id in launches for k in timeline.kernels)
    assert not any(re.search(r"_v\d+$", c.name) for c in timeline.runtime_calls)


def test_reading_leaves_the_file_untouched(export_copy: Path) -> None:
    before = export_copy.read_bytes()
    read_nsys(export_copy)
    assert export_copy.read_bytes() == before
    assert sorted(p.name for p in export_copy.parent.iterdir()) == ["nsys.sqlite"]


def test_older_concurrent_kernel_table(export_copy: Path, timeline: NsysTimeline) -> None:
    _edit(export_copy, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO "
                       "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
    assert read_nsys(export_copy).kernels == timeline.kernels


def test_optional_columns_may_be_missing(export_copy: Path) -> None:
    _edit(export_copy, *(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {c}"
                         for c in ("graphNodeId", "shortName", "staticSharedMemory")))
    first = read_nsys(export_copy).kernels[0]
    assert first.name == "triton_per_fused_native_layer_norm_0"
    assert (first.short_name, first.static_smem_bytes, first.smem_bytes) == (None, None, None)
    assert first.dynamic_smem_bytes == 8


def test_marks_unended_ranges_and_domains(export_copy: Path, timeline: NsysTimeline) -> None:
    tid = timeline.nvtx_ranges[0].tid
    insert = "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, textId, domainId) VALUES"
    _edit(
        export_copy,
        "INSERT INTO StringIds (id, value) VALUES (9001, 'my.domain'), (9002, 'registered text')",
        f"{insert} (5, NULL, 34, {tid}, 'mark', NULL, NULL)",  # a mark
        f"{insert} (6, NULL, 59, {tid}, 'open', NULL, NULL)",  # a push never popped
        f"{insert} (1, NULL, 75, {tid}, NULL, 9001, 3)",  # domain 3 is created
        f"{insert} (7, 90, 60, {tid}, NULL, 9002, 3)",  # a start/end range in it, registered text
    )
    read = read_nsys(export_copy)
    assert read.nvtx_ranges[0] == NvtxRange(text="registered text", start_ns=7, end_ns=90, tid=tid,
                                            domain="my.domain")
    assert read.nvtx_ranges[1:] == timeline.nvtx_ranges
    assert read.warnings == [
        "1 NVTX mark(s) skipped: a mark is an instant, not a range",
        "1 NVTX range(s) skipped: never ended before the capture stopped",
    ]


def test_export_without_nvtx_warns(export_copy: Path) -> None:
    _edit(export_copy, "DROP TABLE NVTX_EVENTS")
    read = read_nsys(export_copy)
    assert read.nvtx_ranges == [] and len(read.kernels) == 44
    assert read.warnings and read.warnings[0].startswith("no NVTX_EVENTS table")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nsys_text.sqlite", "not a SQLite database"),
        ("nsys_not_nsys.sqlite", "not an Nsight Systems export"),
        ("nsys_no_kernel_table.sqlite", "no CUPTI_ACTIVITY_KIND_KERNEL table"),
        ("nsys_no_kernels.sqlite", "the export has no GPU kernels"),
        ("nsys_no_stream_column.sqlite", "lacks the required column(s) streamId"),
        ("nsys_no_runtime_table.sqlite", "lacks the required table CUPTI_ACTIVITY_KIND_RUNTIME"),
        ("nsys_text_in_start.sqlite", "holds a non-integer time"),
        ("nsys_truncated.sqlite", "corrupt or truncated"),
        ("missing.sqlite", "no such Nsight Systems export"),
    ],
    ids=["text-file", "other-sqlite", "no-kernel-table", "no-kernels", "no-stream-column", "no-runtime-table",
         "text-in-start", "truncated", "missing"],
)
def test_broken_files(name: str, expected: str) -> None:
    with pytest.raises(ArtifactFormatError) as caught:
        read_nsys(BROKEN / name)
    message = str(caught.value)
    assert str(BROKEN / name) in message
    assert expected in message
    if name != "missing.sqlite":
        assert "nsys export --type sqlite" in message


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(ArtifactFormatError, match="empty file"):
        read_nsys(empty)


def test_many_registered_nvtx_strings(export_copy: Path, timeline: NsysTimeline) -> None:
    """Past a few thousand distinct string ids the reader loads StringIds whole; texts stay right."""
    tid = timeline.nvtx_ranges[0].tid
    with sqlite3.connect(export_copy) as conn:
        conn.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)",
                         [(100_000 + i, f"step {i}") for i in range(3000)])
        conn.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) "
                         "VALUES (?, ?, 59, ?, ?)", [(i, i + 1, tid, 100_000 + i) for i in range(3000)])
    conn.close()
    read = read_nsys(export_copy)
    assert [r.text for r in read.nvtx_ranges[:3000]] == [f"step {i}" for i in range(3000)]
    assert read.nvtx_ranges[3000:] == timeline.nvtx_ranges


def test_driver_copy_kernels_read_as_copies(export_copy: Path, timeline: NsysTimeline) -> None:
    """A CUDA graph's copy node that CUPTI reports as the driver's kernel (``memcpy32_post``) is a copy."""
    first = timeline.kernels[0]
    _edit(export_copy,
          "INSERT INTO StringIds (id, value) VALUES (9101, 'memcpy32_post')",
          f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 9101, shortName = 9101 "
          f"WHERE start = {first.start_ns}")
    kernels = read_nsys(export_copy).kernels
    assert (kernels[0].name, kernels[0].kind) == ("memcpy32_post", "memcpy")
    assert [k.kind for k in kernels[1:]] == [k.kind for k in timeline.kernels[1:]]
