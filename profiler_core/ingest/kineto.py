"""Read a torch.profiler (Kineto) Chrome trace into a :class:`KinetoTrace`.

Kineto writes ``ts`` and ``dur`` as microseconds with three decimals, relative to
``baseTimeNanoseconds``; records carry integer nanoseconds on the Unix clock::

    {"baseTimeNanoseconds": 1790857026000000000, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "triton_per_fused_native_layer_norm_0",
       "ts": 5081256683329.816, "dur": 1.76, "args": {"stream": 7, "correlation": 12, ...}}]}
    -> TimelineKernel(name="triton_per_fused_native_layer_norm_0",
                      start_ns=1795938282683329816, end_ns=1795938282683331576, stream=7, ...)

Small traces are parsed whole with orjson; larger ones (``STREAM_THRESHOLD_BYTES``,
uncompressed) are streamed a block of events at a time (see ``kineto_stream``), so memory
holds the rows and one block, never the whole document. Kernels, cpu ops and runtime calls
become Arrow tables (``kineto_tables``) handed on beneath ``record_columns.TableRecords``: the
attribution engine reads their columns, any other caller the records, built when first read.
``.json.gz`` is recognised by its magic bytes, whatever the file is called.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Mapping
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

import ijson
import orjson

from profiler_core.confinement import open_input, open_input_gzip
from profiler_core.errors import ArtifactFormatError
from profiler_core.gc_pause import gc_paused
from profiler_core.ingest import kineto_stream
from profiler_core.ingest.arrow_columns import sorted_by_start
from profiler_core.ingest.column_records import cpu_op_records, runtime_records, timeline_records
from profiler_core.ingest.cupti_ranges import ranges_as_timeline
from profiler_core.ingest.kineto_events import EventRecords, Row, collect_events
from profiler_core.ingest.kineto_links import relink_launches
from profiler_core.ingest.kineto_tables import cpu_op_table, kernel_table, runtime_table
from profiler_core.ingest.sanity import check_kernel_table, check_timeline_kernels
from profiler_core.record_columns import TableRecords
from profiler_core.records import KinetoTrace, RuntimeCall, TimelineKernel

# Above this many uncompressed bytes the trace is streamed. Module-level so tests can
# force either path on the same small file.
STREAM_THRESHOLD_BYTES = 32 * 1024 * 1024

# Top-level keys kept as metadata. A fixed set, so the whole-file and streaming paths
# agree; Kineto writes all of them before "traceEvents".
METADATA_KEYS = frozenset({
    "schemaVersion", "deviceProperties", "baseTimeNanoseconds", "cuda_driver_version",
    "cuda_runtime_version", "cupti_version", "trace_id", "record_shapes", "displayTimeUnit",
    "distributedInfo", "with_stack", "with_flops", "with_modules", "profile_memory",
})

_GZIP_MAGIC = b"\x1f\x8b"
_READ_BUFFER_BYTES = 1 << 20
_DECODE_ERRORS = (orjson.JSONDecodeError, ijson.JSONError, gzip.BadGzipFile, EOFError, zlib.error,
                  UnicodeDecodeError)
_REEXPORT = "capture it again with torch.profiler and export_chrome_trace (or tensorboard_trace_handler)"


def _ijson_backend() -> Any:
    # yajl2_c is several times faster than the pure-Python parser; take it when installed.
    try:
        return ijson.get_backend("yajl2_c")
    except (ImportError, ValueError):
        return ijson


_IJSON = _ijson_backend()


def read_kineto(path: str | os.PathLike[str], *, python_functions: frozenset[str] = frozenset(),
                launches_only: bool = False) -> KinetoTrace:
    """Read a torch.profiler trace (``.json`` or ``.json.gz``) into kernels, cpu ops and runtime calls
    (and, from a ``with_stack`` trace, the calls of the Python functions named in ``python_functions``).
    ``launches_only``: a trace of a CUDA graph's recording, whose launches ran no kernel, may hold none."""
    path = Path(path)
    compressed = _is_gzip(path)
    try:
        with gc_paused():
            if _uncompressed_bytes(path, compressed) < STREAM_THRESHOLD_BYTES:
                metadata, events = _load_whole(path, compressed)
                found = collect_events(path, events, _base_time_ns(path, metadata), python_functions)
            else:
                metadata, found = _read_streamed(path, compressed, python_functions)
    except _DECODE_ERRORS as err:
        raise ArtifactFormatError(
            f"{path}: not a readable JSON trace ({type(err).__name__}: {' '.join(str(err).split())}); "
            f"the file is truncated or corrupt: {_REEXPORT}"
        ) from err
    except OSError as err:
        raise ArtifactFormatError(f"{path}: cannot be read ({err.strerror or err}); check the path") from err
    ranges = None
    if not found.kernels and found.profiler_ranges:
        ranges = ranges_as_timeline(path, found.profiler_ranges, [RuntimeCall(*row) for row in found.runtime_calls])
        found.kernels.extend(map(_kernel_row, ranges.kernels))
    if not (launches_only and found.event_count):
        _check_has_kernels(path, found)
    base = metadata.get("baseTimeNanoseconds", 0)
    clock_base = base if type(base) is int else 0
    try:
        kernels = kernel_table(path, found.kernels)
    except ArtifactFormatError:  # a value beyond int64: the records' check names the kernel, if it is a time
        check_timeline_kernels(path, list(map(_kernel_record, found.kernels)), "Kineto", clock_base_ns=clock_base)
        raise
    cpu_ops, calls = cpu_op_table(path, found.cpu_ops), runtime_table(path, found.runtime_calls)
    found.kernels, found.cpu_ops, found.runtime_calls = [], [], []  # the tables hold them now
    check_kernel_table(path, kernels, "Kineto", clock_base_ns=clock_base)
    kernels, _ = relink_launches(kernels, cpu_ops, calls)
    return KinetoTrace(
        path=path,
        kernels=TableRecords(sorted_by_start(kernels), timeline_records),  # stable: ties keep file order
        cpu_ops=TableRecords(sorted_by_start(cpu_ops), cpu_op_records),
        runtime_calls=TableRecords(sorted_by_start(calls), runtime_records),
        metadata=metadata,
        module_spans=sorted(found.module_spans, key=attrgetter("start_ns")),
        python_calls=sorted(found.python_calls, key=attrgetter("start_ns")),
        range_counters=ranges.counters if ranges else None,
        notes=ranges.notes if ranges else (),
    )


def _kernel_row(k: TimelineKernel) -> Row:
    """A kernel record as a ``kineto_events.KERNEL_ROW``."""
    grid, block = k.grid or (None, None, None), k.block or (None, None, None)
    return (k.name, k.start_ns, k.end_ns, k.stream, k.device, k.kind, k.correlation_id, k.external_id,
            *grid, *block, k.registers_per_thread, k.graph_id, k.graph_node_id, k.bytes_moved, k.smem_bytes)


def _kernel_record(row: Row) -> TimelineKernel:
    """A ``kineto_events.KERNEL_ROW`` as its record."""
    (name, start, end, stream, device, kind, correlation, external, gx, gy, gz, bx, by, bz, registers, graph,
     node, size, smem) = row
    return TimelineKernel(name=name, start_ns=start, end_ns=end, stream=stream, device=device, kind=kind,
                          correlation_id=correlation, external_id=external,
                          grid=None if gx is None else (gx, gy, gz), block=None if bx is None else (bx, by, bz),
                          registers_per_thread=registers, graph_id=graph, graph_node_id=node, bytes_moved=size,
                          smem_bytes=smem)


def _check_has_kernels(path: Path, found: EventRecords) -> None:
    if found.event_count == 0:
        raise ArtifactFormatError(f"{path}: the trace has no events (traceEvents is empty); {_REEXPORT}")
    if not found.kernels:
        raise ArtifactFormatError(
            f"{path}: the trace has no GPU kernels; was the profiler run with ProfilerActivity.CUDA "
            f"on a GPU? ({found.event_count} events, {len(found.cpu_ops)} cpu ops)"
        )


def _is_gzip(path: Path) -> bool:
    try:
        with open_input(path, what="Kineto trace") as f:
            return f.read(2) == _GZIP_MAGIC
    except FileNotFoundError as err:
        raise ArtifactFormatError(
            f"{path}: no such Kineto trace; pass the JSON file torch.profiler wrote "
            f"(prof.export_chrome_trace or tensorboard_trace_handler)"
        ) from err
    except OSError as err:
        raise ArtifactFormatError(f"{path}: cannot be read ({err.strerror or err}); check the path") from err


def _uncompressed_bytes(path: Path, compressed: bool) -> int:
    with open_input(path, what="Kineto trace") as f:
        size = os.fstat(f.fileno()).st_size
        if not compressed or size < 18:
            return size
        f.seek(-4, 2)
        isize = int.from_bytes(f.read(4), "little")  # gzip trailer: length mod 2**32
    return max(size, isize)


def _open(path: Path, compressed: bool) -> IO[bytes]:
    if compressed:
        return open_input_gzip(path, what="Kineto trace")
    return open_input(path, what="Kineto trace", buffering=_READ_BUFFER_BYTES)


def _load_whole(path: Path, compressed: bool) -> tuple[dict[str, Any], list[Any]]:
    with _open(path, compressed) as f:
        doc = orjson.loads(f.read())
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise _not_a_trace(path)
    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise _not_a_trace(path, "its traceEvents is not a list")
    return {k: v for k, v in doc.items() if k in METADATA_KEYS}, events


def _read_streamed(path: Path, compressed: bool,
                  python_functions: frozenset[str] = frozenset()) -> tuple[dict[str, Any], EventRecords]:
    """Framed blocks with orjson when the layout allows it, else ijson; memory stays bounded."""
    if kineto_stream.FRAME_BYTES:
        try:
            with _open(path, compressed) as f:
                metadata, blocks = kineto_stream.framed_batches(f, kineto_stream.FRAME_BYTES, METADATA_KEYS)
                if "baseTimeNanoseconds" in metadata:
                    base_ns = _base_time_ns(path, metadata)
                    return metadata, collect_events(path, chain.from_iterable(blocks), base_ns, python_functions)
        except kineto_stream.NotFramable:
            pass  # start over with the token-level reader, which also names what is wrong
    with _open(path, compressed) as f:
        metadata, found = kineto_stream.ijson_head(_IJSON, f, METADATA_KEYS)
    if found == "not-a-list":
        raise _not_a_trace(path, "its traceEvents is not a list")
    if found != "events":
        raise _not_a_trace(path)
    if "baseTimeNanoseconds" not in metadata:
        # Not where Kineto puts it; one extra tokenising pass finds it after the events.
        with _open(path, compressed) as f:
            base = next(_IJSON.items(f, "baseTimeNanoseconds", use_float=True), None)
        if base is not None:
            metadata["baseTimeNanoseconds"] = base
    batches = kineto_stream.ijson_batches(_IJSON, lambda: _open(path, compressed))
    return metadata, collect_events(path, chain.from_iterable(batches), _base_time_ns(path, metadata),
                                    python_functions)


def _base_time_ns(path: Path, metadata: Mapping[str, Any]) -> int:
    base = metadata.get("baseTimeNanoseconds", 0)
    if type(base) is not int:
        raise ArtifactFormatError(f"{path}: baseTimeNanoseconds is {base!r}, not an integer; {_REEXPORT}")
    return base


def _not_a_trace(path: Path, why: str = "it has no traceEvents") -> ArtifactFormatError:
    return ArtifactFormatError(
        f"{path}: not a torch.profiler Chrome trace ({why}); pass the JSON file written by "
        f"prof.export_chrome_trace or tensorboard_trace_handler"
    )
