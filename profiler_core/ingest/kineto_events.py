"""Turn Kineto trace events (decoded JSON objects) into rows: one tuple per event, its record's fields.

Only the categories attribution needs are kept; flow arrows (``ac2g``), metadata (``ph: M``)
and GPU-side annotations are skipped without being looked at further::

    {"cat": "cpu_op", "name": "aten::mm", "tid": 550, "ts": 5081256683490.1, "dur": 40.2,
     "args": {"External id": 7, "Input Dims": [[512, 256], [256, 256]], "Input type": ["float", "float"]}}
    -> ("aten::mm", <start ns>, <end ns>, 550, 7, None, ((512, 256), (256, 256)), ("float", "float"), "cpu_op", None)

Kernels, cpu ops and runtime calls stay rows (``KERNEL_ROW``, ``CPU_OP_ROW``, ``RUNTIME_ROW`` name
their fields): ``kineto_tables`` turns them into Arrow columns, and the records of
``profiler_core.records`` are built from those only when a caller reads one. A tuple is a fifth of
a record's cost to make, and a million of them are columns in a few passes.

Every value read from an event is type-checked: a malformed event raises
``ArtifactFormatError`` naming its index in ``traceEvents``, never a ``KeyError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.cupti_ranges import CATEGORY as RANGE_CATEGORY
from profiler_core.ingest.cupti_ranges import ProfilerRange, range_event
from profiler_core.ingest.driver_copies import driver_copy_kind
from profiler_core.record_columns import CPU_OP_COLUMNS, KINETO_RUNTIME_COLUMNS
from profiler_core.records import Dim3, ModuleSpan

_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_CPU_CATEGORIES = frozenset({"cpu_op", "user_annotation"})
_RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
_NO_ARGS: dict[str, Any] = {}
_MODULE_PREFIX = "nn.Module: "  # the Python tracer's label for a module call (with_stack=True)
_REQUIRED = frozenset({"stream", "device", "tid"})
# Type sets for C-speed checks: ``_INT.issuperset(map(type, values))``. bool is excluded on purpose.
_INT = frozenset({int})
_INT_OR_NONE = frozenset({int, type(None)})
_STR = frozenset({str})
_LIST = frozenset({list})
_NO_DIM = (None, None, None)
# The fields of a row, in order (grid and block as their three axes)
KERNEL_ROW = (
    "name", "start_ns", "end_ns", "stream", "device", "kind", "correlation_id", "external_id",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "graph_id",
    "graph_node_id", "bytes_moved", "smem_bytes",
)
CPU_OP_ROW = CPU_OP_COLUMNS  # a cpu op's and a runtime call's rows are their tables' columns, in order
RUNTIME_ROW = KINETO_RUNTIME_COLUMNS
Row = tuple[Any, ...]


@dataclass
class EventRecords:
    """What one pass over ``traceEvents`` found (in file order): rows of kernels (``KERNEL_ROW``), cpu ops
    (``CPU_OP_ROW``) and runtime calls (``RUNTIME_ROW``), and records of the rest."""

    kernels: list[Row] = field(default_factory=list)
    cpu_ops: list[Row] = field(default_factory=list)
    runtime_calls: list[Row] = field(default_factory=list)
    module_spans: list[ModuleSpan] = field(default_factory=list)
    python_calls: list[ModuleSpan] = field(default_factory=list)
    profiler_ranges: list[ProfilerRange] = field(default_factory=list)  # CUPTI range profiler kernels
    event_count: int = 0


def collect_events(path: Path, events: Iterable[Any], base_ns: int,
                   python_functions: frozenset[str] = frozenset()) -> EventRecords:
    """Convert the kernel, cpu_op/user_annotation and cuda_runtime/driver events of a trace, and the
    calls of the Python functions named in ``python_functions`` (``generate``)."""
    found = EventRecords()
    kernels, cpu_ops, runtime_calls = found.kernels, found.cpu_ops, found.runtime_calls
    index = -1
    for index, event in enumerate(events):
        # The try covers the body only: decoding errors raised by the iterator itself
        # (truncated file) must reach the caller as such, not as a "malformed event".
        try:
            category = event.get("cat")
            kind = _GPU_KINDS.get(category)
            if kind is not None:
                kernels.append(_gpu_activity(event, kind, base_ns))
            elif category in _CPU_CATEGORIES:
                cpu_ops.append(_cpu_op(event, category, base_ns))
            elif category in _RUNTIME_CATEGORIES:
                runtime_calls.append(_runtime_call(event, base_ns))
            elif category == "python_function":
                name = event["name"]
                if name.startswith(_MODULE_PREFIX):
                    found.module_spans.append(_module_span(event, base_ns))
                elif python_functions and name.rpartition("): ")[2] in python_functions:
                    found.python_calls.append(_python_call(event, base_ns))
            elif category == RANGE_CATEGORY:
                found.profiler_ranges.append(range_event(event, base_ns, us_to_ns))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, ArithmeticError) as err:
            raise _malformed(path, index, event, err) from err
    found.event_count = index + 1
    return found


def _gpu_activity(event: dict[str, Any], kind: str, base_ns: int) -> Row:
    args = event["args"]
    get = args.get
    name, stream, device = event["name"], args["stream"], args["device"]
    correlation, external = get("correlation"), get("External id")
    registers, smem = get("registers per thread"), get("shared memory")
    graph, node, size = get("graph id"), get("graph node id"), get("bytes")
    # One combined check keeps the per-event cost low; _integers() says which value failed.
    if type(name) is not str or not (type(stream) is type(device) is int) or not _all_optional_int(
        correlation, external, registers, smem, graph, node, size
    ):
        _integers(name=name, stream=stream, device=device, correlation=correlation, external=external,
                  registers=registers, smem=smem, graph=graph, node=node, size=size)
    if kind == "kernel" and name[:3] == "mem":  # a graph's copy/set node run as the driver's kernel
        kind = driver_copy_kind(name) or kind
    start_ns = base_ns + us_to_ns(event["ts"])
    grid, block = _dim3(get("grid")) or _NO_DIM, _dim3(get("block")) or _NO_DIM
    return (
        name, start_ns, start_ns + us_to_ns(event["dur"]), stream, device, kind, correlation, external,
        grid[0], grid[1], grid[2], block[0], block[1], block[2], registers,
        graph or None, node or None,  # CUPTI writes 0 for "not launched by a graph"
        size, smem,
    )


def _cpu_op(event: dict[str, Any], category: str, base_ns: int) -> Row:
    args = event.get("args") or _NO_ARGS
    get = args.get
    name, tid = event["name"], event["tid"]
    external, sequence = get("External id"), get("Sequence number")
    if type(name) is not str or type(tid) is not int or not _all_optional_int(external, sequence):
        _integers(name=name, tid=tid, external=external, sequence=sequence)
    shapes, types, fwd = get("Input Dims"), get("Input type"), get("Fwd thread id")
    start_ns = base_ns + us_to_ns(event["ts"])
    return (
        name, start_ns, start_ns + us_to_ns(event["dur"]), tid, external, sequence,
        None if shapes is None else shapes_of(shapes), None if types is None else _strings(types), category,
        fwd if type(fwd) is int else None,
    )


def _runtime_call(event: dict[str, Any], base_ns: int) -> Row:
    args = event.get("args") or _NO_ARGS
    name, tid = event["name"], event["tid"]
    correlation, external = args.get("correlation"), args.get("External id")
    if type(name) is not str or type(tid) is not int or not _all_optional_int(correlation, external):
        _integers(name=name, tid=tid, correlation=correlation, external=external)
    start_ns = base_ns + us_to_ns(event["ts"])
    return name, start_ns, start_ns + us_to_ns(event["dur"]), tid, correlation, external


def _module_span(event: dict[str, Any], base_ns: int) -> ModuleSpan:
    return _python_call(event, base_ns, event["name"][len(_MODULE_PREFIX):])


def _python_call(event: dict[str, Any], base_ns: int, name: str | None = None) -> ModuleSpan:
    """A Python tracer event as a span, named ``name`` (its own name by default)."""
    name, tid = event["name"] if name is None else name, event["tid"]
    if type(tid) is not int:
        _integers(name=name, tid=tid)
    start_ns = base_ns + us_to_ns(event["ts"])
    return ModuleSpan(name, start_ns, start_ns + us_to_ns(event["dur"]), tid)


def us_to_ns(value: Any) -> int:
    """Microseconds (float, int or Decimal, as JSON parsers give them) to integer nanoseconds.

    ``round(ts * 1000)`` can be off by 1 ns: at Kineto's magnitudes (~5e12 us) the product
    no longer fits the mantissa. Splitting off the exact integer part keeps the rounding
    on the small fractional part only, so ``5081256683329.816`` gives ``...329816`` exactly.
    Exact up to 2**43 us (101 days of trace clock); beyond, a double cannot hold 1 ns.
    """
    if type(value) is bool:
        raise TypeError(f"expected a number of microseconds, got {value!r}")
    whole = int(value)  # exact for floats; raises on NaN, inf and strings
    return whole * 1000 + round((value - whole) * 1000)


def _all_optional_int(*values: Any) -> bool:
    return _INT_OR_NONE.issuperset(map(type, values))


def _integers(**values: Any) -> None:
    """Raise a TypeError naming the first value of the wrong type (names are strings, the rest ints)."""
    for key, value in values.items():
        if key == "name":
            if type(value) is not str:
                raise TypeError(f"expected a string name, got {value!r}")
        elif type(value) is not int and (value is not None or key in _REQUIRED):
            raise TypeError(f"expected an integer {key}, got {value!r}")


def _dim3(value: Any) -> Dim3 | None:
    if value is None:
        return None
    if type(value) is list and len(value) == 3 and _INT.issuperset(map(type, value)):
        return (value[0], value[1], value[2])
    raise TypeError(f"expected [x, y, z] integers, got {value!r}")


def _strings(value: Any) -> tuple[str, ...]:
    if type(value) is list and _STR.issuperset(map(type, value)):
        return tuple(value)
    raise TypeError(f"expected a list of strings, got {value!r}")


def shapes_of(value: Any) -> tuple[Any, ...]:
    """``Input Dims`` as nested tuples so records stay hashable: ``[[4, 128], []]`` -> ``((4, 128), ())``."""
    if type(value) is list and _LIST.issuperset(map(type, value)):
        flat = tuple(map(tuple, value))
        try:
            hash(flat)  # fails when a list is nested deeper (TensorList arguments)
            return flat
        except TypeError:
            pass
    return _frozen(value)


def shapes_from_text(text: str) -> tuple[Any, ...]:
    """A shape list kept as JSON text (``kineto_tables``) as :func:`shapes_of` made it."""
    return shapes_of(orjson.loads(text))


def _frozen(value: Any) -> tuple[Any, ...]:
    if type(value) is not list:
        raise TypeError(f"expected a list, got {value!r}")
    return tuple([_frozen(v) if type(v) is list else v for v in value])


def _malformed(path: Path, index: int, event: Any, err: Exception) -> ArtifactFormatError:
    if not isinstance(event, dict):
        what, detail = "", f"is not a JSON object but {type(event).__name__}"
    else:
        what = f" ({event.get('cat')!s} {str(event.get('name'))[:80]!r})"
        detail = f"has no {err.args[0]!r}" if isinstance(err, KeyError) else f"{err}"
        if isinstance(err, AttributeError):
            detail = "its args is not a JSON object"
    return ArtifactFormatError(
        f"{path}: traceEvents[{index}]{what} is malformed: {detail}; the trace was edited or written "
        f"by another tool: capture it again with torch.profiler"
    )
