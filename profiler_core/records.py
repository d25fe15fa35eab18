"""Internal records the readers produce and the attribution engine consumes.

These are frozen, slotted dataclasses: cheap to hold by the million, hashable, and never
mutated after a reader builds them. Times are integer nanoseconds on the clock of the run
that produced them (Kineto, nsys and ncu clocks are *not* comparable; joins never use time
across runs). Dimensions are ``(x, y, z)`` tuples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Dim3 = tuple[int, int, int]


class LaunchDims(Protocol):
    """Anything that records one launch's grid and block (a timeline kernel, a counter row)."""

    @property
    def grid(self) -> Dim3 | None: ...

    @property
    def block(self) -> Dim3 | None: ...


@dataclass(frozen=True, slots=True)
class TimelineKernel:
    """One GPU activity (kernel, memcpy or memset) as a timeline source saw it."""

    name: str  # as the source spells it (Kineto: demangled; nsys: demangled when present)
    start_ns: int
    end_ns: int
    stream: int
    device: int
    kind: str = "kernel"  # "kernel" | "memcpy" | "memset"
    short_name: str | None = None
    correlation_id: int | None = None  # CUPTI correlation id (links to the runtime launch)
    external_id: int | None = None  # Kineto "External id" of the launching cpu_op
    grid: Dim3 | None = None
    block: Dim3 | None = None
    registers_per_thread: int | None = None
    static_smem_bytes: int | None = None
    dynamic_smem_bytes: int | None = None
    graph_id: int | None = None  # set when launched by a CUDA graph replay
    graph_node_id: int | None = None
    bytes_moved: int | None = None  # memcpy / memset size
    smem_bytes: int | None = None  # static + dynamic shared memory per block (Kineto gives only the sum)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class CpuOp:
    """A host-side operator record (Kineto ``cpu_op`` / ``user_annotation``)."""

    name: str
    start_ns: int
    end_ns: int
    tid: int
    external_id: int | None = None
    sequence_number: int | None = None
    input_shapes: tuple[Any, ...] | None = None
    input_types: tuple[str, ...] | None = None
    category: str = "cpu_op"
    # set on autograd's backward ops: which thread ran the forward op of the same sequence number
    fwd_thread_id: int | None = None


@dataclass(frozen=True, slots=True)
class ModuleSpan:
    """One ``nn.Module`` call as torch.profiler's Python tracer (``with_stack``) recorded it.

    ``name`` is the tracer's instance label, class name and per-class index in first-call
    order (``Linear_4``); a module map from the capture turns it into the module's path.
    """

    name: str
    start_ns: int
    end_ns: int
    tid: int


@dataclass(frozen=True, slots=True)
class RuntimeCall:
    """A CUDA runtime/driver API call on the host (e.g. ``cudaLaunchKernel``)."""

    name: str
    start_ns: int
    end_ns: int
    tid: int
    correlation_id: int | None = None
    external_id: int | None = None


@dataclass(frozen=True, slots=True)
class NvtxRange:
    """An NVTX push/pop or start/end range on one host thread."""

    text: str
    start_ns: int
    end_ns: int
    tid: int
    domain: str | None = None


@dataclass(frozen=True, slots=True)
class CounterRow:
    """One kernel launch measured by Nsight Compute.

    ``metrics`` maps the ncu metric name to its value in base units (``None`` when ncu
    printed ``n/a`` or nothing). ``nvtx_stack`` is the push/pop stack ncu recorded for the
    launch, outermost first, when the report was taken with ``--nvtx``.
    """

    ncu_id: int
    name: str
    grid: Dim3 | None
    block: Dim3 | None
    stream: int | None
    device: int | None
    metrics: Mapping[str, float | None]
    nvtx_stack: tuple[str, ...] = ()
    process_id: int | None = None
    context: int | None = None


@dataclass(frozen=True, slots=True)
class FusionRecord:
    """What Inductor says a generated kernel computes: its constituent ATen ops."""

    kernel_name: str
    aten_ops: tuple[str, ...]  # e.g. ("aten::addmm", "aten::relu")
    source_nodes: tuple[str, ...] = ()
    source: str = "output_code"  # "provenance" | "output_code" | "both"
    post_grad_nodes: tuple[str, ...] = ()  # Inductor's post-grad FX nodes fused into the kernel
    stack_traces: tuple[str, ...] = ()  # user source lines behind it (provenance tracking)


@dataclass(frozen=True, slots=True)
class InductorCall:
    """One launch in a compiled graph's ``call()``: a Triton kernel, or an extern library call."""

    kind: str  # "triton" | "extern"
    name: str  # Triton kernel name, or the clean op of an extern call ("aten::addmm")


@dataclass(frozen=True)
class KinetoTrace:
    """Everything attribution needs from one torch.profiler trace."""

    path: Path
    kernels: Sequence[TimelineKernel]  # a list, or the reader's TableRecords (record_columns.py)
    cpu_ops: Sequence[CpuOp]
    runtime_calls: Sequence[RuntimeCall]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    module_spans: list[ModuleSpan] = field(default_factory=list)  # with_stack traces only
    # with_stack traces: calls of the Python functions the reader was asked for (the model's own
    # methods, ``generate``), each named as the tracer names it: ``file.py(line): name``
    python_calls: list[ModuleSpan] = field(default_factory=list)
    # CUPTI range profiler traces: the counters its ranges carry, and what to say about them
    range_counters: NcuReport | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NsysTimeline:
    """Everything attribution needs from one Nsight Systems SQLite export."""

    path: Path
    kernels: Sequence[TimelineKernel]  # a list, or the reader's TableRecords (record_columns.py)
    runtime_calls: Sequence[RuntimeCall]
    nvtx_ranges: Sequence[NvtxRange]
    gpus: list[Mapping[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NcuReport:
    """The rows of one Nsight Compute report, in launch order."""

    path: Path
    rows: Sequence[CounterRow]  # a list, or the reader's TableRecords (record_columns.py)
    metrics_returned: frozenset[str]
    source: str  # "csv" | "ncu-rep"
    units: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InductorArtifacts:
    """Kernel name -> fusion record, from provenance JSON or output-code comments."""

    path: Path
    fusions: Mapping[str, FusionRecord]
    source: str  # "provenance" | "output_code" | "both"
    # the launch order of each compiled graph's call(): what a CUDA-graph replay repeats
    call_sequences: tuple[tuple[InductorCall, ...], ...] = ()
    # every kernel call (``triton_poi_fused_add_3:7``, ``extern_kernels.mm:2``) of every compiled
    # graph in call() order, with the nn.Module path it computes for (provenance + pre-grad graph)
    call_modules: tuple[tuple[str, str | None], ...] = ()
