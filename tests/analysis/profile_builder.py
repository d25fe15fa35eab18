"""A small builder for readable synthetic profiles in tests.

    b = ProfileBuilder()
    b.op("aten::mm", k("sgemm_128x64_nn", 50, tensor_core_active_pct=0, achieved_occupancy_pct=12),
         shapes=[[512, 256], [256, 256]])
    b.unattributed(k("RNN_blockPersist_fp_LSTM", 300))
    profile = b.build()

Kernels are laid end to end on their stream with ``gap_us`` between them, operators get
per-name call indices and aggregated metrics, coverage is computed, and the capture meta
(GPU, chip, iterations, clocks, sources) can be set per profile to test comparability.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from profiler_core.attribution.aggregate import aggregate_samples
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.schema import (
    Attribution,
    CaptureMeta,
    ClockSample,
    Confidence,
    CounterSource,
    Coverage,
    Evidence,
    ExecutionContext,
    Kernel,
    Operator,
    OperatorClass,
    Profile,
    SourceInfo,
    Tier,
    TierCoverage,
    UnattributedKernel,
)


@dataclass
class K:
    """One kernel to lay on the timeline."""

    name: str
    us: float
    counters: dict[str, float | None] = field(default_factory=dict)
    stream: int = 7
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    fused_with: list[str] = field(default_factory=list)
    graph_id: int | None = None
    kind: str = "kernel"  # "kernel" | "memcpy" | "memset"


def k(name: str, us: float, *, stream: int = 7, grid: tuple[int, int, int] | None = None,
      fused_with: list[str] | None = None, graph_id: int | None = None, kind: str = "kernel",
      **counters: float | None) -> K:
    """A kernel spec: name, duration in microseconds, counters by catalog field name."""
    return K(name, us, dict(counters), stream, grid, (128, 1, 1) if grid else None, fused_with or [],
             graph_id, kind)


class ProfileBuilder:
    """Accumulates operators and kernels, then builds a valid Profile."""

    def __init__(self, *, gpu_name: str | None = "NVIDIA H200", chip: str | None = "gh100",
                 warmup: int | None = 2, measured: int | None = 2, sm_mhz: float | None = 1980.0,
                 clock_policy: str = "observe", compile_mode: str | None = "default",
                 sources: tuple[str, ...] = ("kineto", "ncu"), timeline_source: str = "kineto",
                 gap_us: float = 1.0, workload: str = "synthetic.py", torch: str | None = "2.11.0",
                 clock_basis: str | None = "busy") -> None:
        self.capture = CaptureMeta(
            workload=workload, gpu_name=gpu_name, chip=chip, warmup_iterations=warmup,
            measured_iterations=measured, compile_mode=compile_mode, clock_policy=clock_policy,  # type: ignore[arg-type]
            clocks=([ClockSample(phase=timeline_source, sm_mhz_median=sm_mhz, samples=10, basis=clock_basis)]  # type: ignore[arg-type]
                    if sm_mhz else []),
            timeline_source=timeline_source,  # type: ignore[arg-type]
            counter_mode="full",
            sources=[SourceInfo(kind=s) for s in sources],  # type: ignore[arg-type]
        )
        self.capture.versions.torch = torch
        self.gap_ns = round(gap_us * 1000)
        self.cursor: dict[int, int] = defaultdict(int)
        self.kernels: list[Kernel] = []
        self.operators: list[Operator] = []
        self.unattributed_rows: list[UnattributedKernel] = []
        self.calls: dict[str, int] = defaultdict(int)
        self.next_start = 0

    def _lay(self, spec: K, attribution: Attribution, gap_ns: int | None) -> Kernel:
        start = self.next_start + (self.gap_ns if gap_ns is None else gap_ns)
        dur = round(spec.us * 1000)
        self.next_start = start + dur
        kernel = Kernel(
            id=len(self.kernels), name=spec.name, stream=spec.stream, device=0, start_ns=start,
            end_ns=start + dur, duration_ns=dur, grid=spec.grid, block=spec.block,
            counters=spec.counters,
            counter_source=CounterSource.MEASURED if spec.counters else CounterSource.MISSING,
            attribution=attribution, fused_with=spec.fused_with, graph_id=spec.graph_id,
            kind=spec.kind,  # type: ignore[arg-type]
        )
        self.kernels.append(kernel)
        return kernel

    def op(self, name: str, *kernels: K, op_class: OperatorClass | None = None,
           shapes: list[Any] | None = None, context: ExecutionContext = ExecutionContext.COMPILED_GRAPH,
           fused_with: list[str] | None = None, tier: Tier = Tier.CUPTI_CORRELATION,
           confidence: Confidence = Confidence.HIGH, gap_us: float | None = None,
           module: str | None = None) -> str:
        """Add an operator with its kernels (under nn.Module ``module``); returns its key (``name#call_index``)."""
        index = self.calls[name]
        self.calls[name] += 1
        key = f"{name}#{index}"
        laid = []
        for i, spec in enumerate(kernels):
            gap = round(gap_us * 1000) if gap_us is not None and i == 0 else None
            attribution = Attribution(operator_key=key, tier=tier, confidence=confidence,
                                      evidence=[Evidence(tier=tier, operator=name)])
            laid.append(self._lay(spec, attribution, gap))
        fused = list(fused_with or [])
        self.operators.append(Operator(
            key=key, name=name, call_index=index, input_shapes=shapes,
            op_class=op_class or classify_operator(name, fused), execution_context=context,
            is_fused=bool(fused), fused_with=fused, kernel_ids=[k.id for k in laid],
            kernel_count=len(laid), duration_ns=sum(k.duration_ns for k in laid),
            metrics=aggregate_samples((k.counters, k.duration_ns) for k in laid if k.counters),
            confidence=confidence, module_path=module,
        ))
        return key

    def unattributed(self, *kernels: K, reason: str = "no enclosing operator range") -> list[int]:
        """Add kernels no operator owns; returns their ids."""
        ids = []
        for spec in kernels:
            kernel = self._lay(spec, Attribution(operator_key=None, tier=Tier.UNATTRIBUTED,
                                                 confidence=Confidence.NONE, reason=reason), None)
            self.unattributed_rows.append(UnattributedKernel(
                kernel_id=kernel.id, name=kernel.name, duration_ns=kernel.duration_ns, reason=reason))
            ids.append(kernel.id)
        return ids

    def build(self) -> Profile:
        """The profile, with coverage computed from the kernels."""
        by_tier: dict[str, TierCoverage] = defaultdict(TierCoverage)
        by_conf: dict[str, TierCoverage] = defaultdict(TierCoverage)
        for kern in self.kernels:
            for table, key in ((by_tier, kern.attribution.tier.value),
                               (by_conf, kern.attribution.confidence.value)):
                table[key] = TierCoverage(kernel_count=table[key].kernel_count + 1,
                                          duration_ns=table[key].duration_ns + kern.duration_ns)
        total = sum(kern.duration_ns for kern in self.kernels)
        good = sum(c.duration_ns for name, c in by_conf.items() if name in ("high", "medium"))
        return Profile(
            capture=self.capture.model_copy(deep=True),
            operators=list(self.operators),
            kernels=list(self.kernels),
            unattributed=list(self.unattributed_rows),
            coverage=Coverage(kernel_count=len(self.kernels), duration_ns=total, by_tier=dict(by_tier),
                              by_confidence=dict(by_conf),
                              attributed_time_pct=100.0 * good / total if total else 0.0),
        )
