"""Rules for the models users bring: convolution networks, eager models, training steps.

    conv_batchnorm           normalization right after convolutions        -> conv_bn_folding (or freezing)
    layout_transposition     nchwToNhwc / cuDNN convertTensor / Inductor layout copies before
                             convolutions, or NCHW convolutions           -> channels_last
    conv_tensor_core_low     convolutions with the Tensor Cores mostly idle -> bf16_promotion (or tf32)
    eager_small_kernels      many small eager elementwise kernels          -> inductor_compile
    optimizer_small_kernels  many small kernels under the optimizer step   -> fused_optimizer
                                                                            (or compiled_optimizer_step)
    training_step_phases     forward / backward / optimizer time            (note)
"""

from __future__ import annotations

import re
import statistics
from collections import Counter

import numpy as np

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.rules import RuleContext, counter, fmt_pct, rule
from profiler_core.schema import ExecutionContext, Kernel, Operator, OperatorClass
from profiler_core.transformations import Transformation

_CONV_FIELDS = ("tensor_core_active_pct", "sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct")
_BATCH_NORM = re.compile(r"batch_norm|batchnorm|bn_fw|bn_infer", re.I)
_LAYOUT = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|nchw_to_nhwc|nhwc_to_nchw"
                     # cuDNN's own layout conversion, and an Inductor kernel that does nothing but lay out a
                     # convolution's operand (its only fused op is the convolution: a copy into NHWC)
                     r"|convertTensor_kernel|^triton_[a-z]+_fused_convolution_\d+$", re.I)
_NCHW_OUTPUT = re.compile(r"_nchw(?!.*nhwc)", re.I)  # a cuDNN convolution whose kernel name says NCHW only
_HALF = re.compile(r"bf16|fp16|f16f16|h884|h1688|h16816|hmma|half", re.I)
_FUSED_OPTIMIZER = re.compile(r"_fused_adam|_fused_sgd|_fused_adagrad|fused_adam|FusedAdam", re.I)


def _is_batch_norm(ctx: RuleContext, op: Operator) -> bool:
    if _BATCH_NORM.search(op.name) or any(_BATCH_NORM.search(f) for f in op.fused_with):
        return True
    view = ctx.view
    return any(view.matches(_BATCH_NORM, k.name) or any(view.matches(_BATCH_NORM, f) for f in k.fused_with)
               for k in view.kernels_of(op))


@rule("conv_batchnorm")
def conv_batchnorm(ctx: RuleContext) -> list[Finding]:
    """Normalization work launched right after a convolution: an eval BatchNorm a fold would remove."""
    ops, conv = ctx.ops, ctx.of_class(OperatorClass.CONVOLUTION)
    # the class tests first, at once (an operator right after a convolution, not one itself); the
    # name tests only for those
    after_conv = np.flatnonzero(conv[:-1] & ~conv[1:]) + 1
    norms = [op for i in after_conv.tolist() if _is_batch_norm(ctx, op := ops[i])]
    if not norms:
        return []
    convs = int(conv.sum())
    kernels = ctx.view.kernels_of_ops(norms)
    agg = ctx.view.counters_of(kernels, ("dram_throughput_pct", "sm_throughput_pct"))
    fused = sum(1 for op in norms if op.is_fused or any(k.fused_with for k in ctx.view.kernels_of(op)))
    return [ctx.finding(
        "conv_batchnorm",
        title="BatchNorm recomputed after every convolution",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(norms)} normalization operators follow a convolution (of {convs}), at DRAM throughput "
                 f"{fmt_pct(counter(agg, 'dram_throughput_pct'))}"),
        bottleneck="an eval-mode BatchNorm is a fixed affine map, yet each call streams the activation through "
                   "DRAM once more to apply it",
        ops=norms,
        kernels=kernels,
        transformation=Transformation.CONV_BN_FOLDING,
        alternatives=[Transformation.FREEZING],
        facts=[f"{fused} of them run in kernels fused with other work (the fold removes the normalization "
               "part, not the whole kernel)" if fused else "each runs in a kernel of its own",
               "folding needs the model in eval mode (running statistics fixed)"],
        counter_fields=("dram_throughput_pct", "sm_throughput_pct"),
        expected_shifts={"dram_throughput_pct": "down"},
    )]


@rule("layout_transposition")
def layout_transposition(ctx: RuleContext) -> list[Finding]:
    """Layout-conversion kernels around convolutions, or convolutions writing NCHW."""
    view = ctx.view  # the layout kernels by name code: each distinct name matched once
    layout = [view.kernels[p] for p in np.flatnonzero(view.name_matches(_LAYOUT)[view.kernel_name_codes]).tolist()]
    nchw_convs = [k for i in np.flatnonzero(ctx.of_class(OperatorClass.CONVOLUTION)).tolist()
                  for k in ctx.view.kernels_of(ctx.ops[i]) if ctx.view.matches(_NCHW_OUTPUT, k.name)]
    layout_ns = sum(k.duration_ns for k in layout)
    if not nchw_convs and ctx.view.share_pct(layout_ns) < ctx.thresholds.layout_transpose_min_pct:
        return []
    owner = ctx.view.kernel_operator
    kernels: list[Kernel] = layout if layout_ns else nchw_convs
    ops = list({op.key: op for k in kernels if (op := owner.get(k.id)) is not None}.values())
    names = Counter(re.sub(r"<.*", "", k.name) for k in layout)
    return [ctx.finding(
        "layout_transposition",
        title="Convolutions in NCHW: layout transpositions around cuDNN",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(layout)} layout-transposition kernels ({fmt_pct(ctx.view.share_pct(layout_ns))} of kernel "
                 f"time)" + (f", {len(nchw_convs)} convolution kernels writing NCHW" if nchw_convs else "")),
        bottleneck="cuDNN's tensor-core convolutions work in NHWC; NCHW activations are transposed on the way "
                   "in and out",
        ops=ops,
        kernels=kernels,
        transformation=Transformation.CHANNELS_LAST,
        facts=[*(f"{n} x {name}" for name, n in names.most_common(3)),
               *([f"{len(nchw_convs)} convolution kernels name an NCHW layout"] if nchw_convs else [])],
        gain_ns=layout_ns or None,
    )]


@rule("conv_tensor_core_low")
def conv_tensor_core_low(ctx: RuleContext) -> list[Finding]:
    """Convolutions whose Tensor Cores are mostly idle, in kernels that say no 16-bit precision."""
    limit = ctx.thresholds.conv_tensor_core_low_pct
    low = []
    for i in np.flatnonzero(ctx.of_class(OperatorClass.CONVOLUTION)).tolist():
        op = ctx.ops[i]
        tc = ctx.view.op_counter(op, "tensor_core_active_pct")
        if tc is None or tc > limit or any(ctx.view.matches(_HALF, k.name) for k in ctx.view.kernels_of(op)):
            continue
        low.append(op)
    if not low:
        return []
    kernels = ctx.view.kernels_of_ops(low)
    agg = ctx.view.counters_of(kernels, _CONV_FIELDS)
    tf32 = sum(1 for k in kernels if "tf32" in k.name.lower())
    return [ctx.finding(
        "conv_tensor_core_low",
        title="Tensor Cores mostly idle in FP32 convolutions",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(low)} convolution operators at tensor_core_active_pct "
                 f"{fmt_pct(counter(agg, 'tensor_core_active_pct'))} (<= {limit:g}%)"),
        bottleneck="32-bit convolutions (FP32, or TF32 at a third of the bf16 rate) leave the Tensor Cores "
                   "waiting; bf16 halves the bytes and runs at full tensor-core rate",
        ops=low,
        kernels=kernels,
        transformation=Transformation.BF16_PROMOTION,
        alternatives=[Transformation.TF32],
        facts=[f"{tf32} of {len(kernels)} kernels already run TF32" if tf32 else "no kernel name says TF32",
               "the bf16 plan keeps BatchNorm, activations and the parameters in float32"],
        counter_fields=_CONV_FIELDS,
        expected_shifts={"tensor_core_active_pct": "up"},
    )]


@rule("eager_small_kernels")
def eager_small_kernels(ctx: RuleContext) -> list[Finding]:
    """Many small elementwise kernels, one per operator, in an eagerly run capture."""
    t = ctx.thresholds
    if (ctx.view.profile.capture.compile_mode or "") != "eager":
        return []
    small = []
    for op in ctx.ops:
        if op.execution_context is not ExecutionContext.EAGER:
            continue
        if ctx.view.work_class(op) not in (OperatorClass.ELEMENTWISE, OperatorClass.NORMALIZATION,
                                           OperatorClass.CAST_COPY, OperatorClass.REDUCTION):
            continue
        ks = ctx.view.kernels_of(op)
        if ks and statistics.median(k.duration_ns for k in ks) <= t.small_kernel_us * 1000:
            small.append(op)
    if len(small) < t.eager_elementwise_min_ops:
        return []
    kernels = ctx.view.kernels_of_ops(small)
    names = Counter(op.name for op in small)
    return [ctx.finding(
        "eager_small_kernels",
        title="Eager model: one small kernel per elementwise operator",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(small)} eager elementwise operators whose kernels run at most {t.small_kernel_us:g} us "
                 f"(median), {len(kernels)} kernels in all"),
        bottleneck="every operator pays a launch and a round trip through DRAM; a compiler would fuse the chains",
        ops=small,
        kernels=kernels,
        transformation=Transformation.INDUCTOR_COMPILE,
        facts=[", ".join(f"{n} x {name}" for name, n in names.most_common(4))],
        expected_shifts={"dram_throughput_pct": "down"},
    )]


def _optimizer_ops(ctx: RuleContext) -> list[Operator]:
    return [ctx.ops[i] for i in np.flatnonzero(ctx.view.op_flags(ctx.ops, "phase",
                                                                 lambda phase: phase == "optimizer")).tolist()]


@rule("optimizer_small_kernels")
def optimizer_small_kernels(ctx: RuleContext) -> list[Finding]:
    """Many small kernels under the optimizer's step: a per-parameter update loop."""
    t = ctx.thresholds
    ops = _optimizer_ops(ctx)
    if not ops or any(_FUSED_OPTIMIZER.search(op.name) for op in ops):
        return []
    kernels = ctx.view.kernels_of_ops(ops)
    iterations = max(ctx.view.profile.capture.measured_iterations or 1, 1)
    durations = ctx.view.durations_in(kernels)
    small = int((durations <= t.small_kernel_us * 1000).sum())
    if small / iterations < t.optimizer_min_kernels:
        return []
    foreach = sum(1 for op in ops if "_foreach_" in op.name)
    return [ctx.finding(
        "optimizer_small_kernels",
        title="Optimizer step launches many small kernels",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{small // iterations} kernels of at most {t.small_kernel_us:g} us per optimizer step "
                 f"({len(kernels) // iterations} kernels in all)"),
        bottleneck="the update runs as a loop of tiny launches over the parameters; a fused implementation "
                   "updates a whole parameter group per kernel",
        ops=ops,
        kernels=kernels,
        transformation=Transformation.FUSED_OPTIMIZER,
        alternatives=[Transformation.COMPILED_OPTIMIZER_STEP],
        facts=[f"{foreach} of {len(ops)} operators are multi-tensor (foreach) ops" if foreach
               else "per-parameter ops (no foreach): the for-loop implementation",
               f"median kernel {statistics.median(durations.tolist()) / 1000:.1f} us"],
    )]


@rule("training_step_phases")
def training_step_phases(ctx: RuleContext) -> list[Finding]:
    """Where a training step's kernel time goes: forward, backward, optimizer (a note)."""
    by_phase: Counter[str] = Counter()
    phases = ctx.view.op_column("phase", ctx.ops)
    durations = ctx.view.op_durations[ctx.view.op_order].tolist()
    for phase, duration in zip(phases, durations, strict=True):
        if phase is not None:
            by_phase[phase] += duration
    if not by_phase or set(by_phase) == {"forward"}:
        return []
    total = sum(by_phase.values())
    parts = [f"{p} {by_phase[p] / 1e6:.2f} ms ({100 * by_phase[p] / total:.1f}%)"
             for p in ("forward", "backward", "optimizer") if p in by_phase]
    return [ctx.finding(
        "training_step_phases",
        title="Training step: forward / backward / optimizer time",
        kind=FindingKind.NOTE,
        symptom="kernel time by phase of the step: " + ", ".join(parts),
        bottleneck="where the step's time goes; the other findings say why",
        ops=ctx.view.operators_in_order_at([i for i, phase in enumerate(phases) if phase in ("backward", "optimizer")]),
        facts=[*parts, "phases come from the profiler's autograd and Optimizer.step ranges around each launch"],
        gain_ns=0,
    )]
