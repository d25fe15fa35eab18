"""Operator class, GEMM precision and overhead kind from an operator or kernel name.

The attribution engine stamps ``op_class`` on operators; analysis still needs to classify
what has no operator (unattributed kernels, kernels new in an optimized run) and to read a
GEMM's precision off its kernel name. Names come in three spellings:

    classify_operator("aten::addmm")                                   -> GEMM
    classify_operator("triton_poi_fused__to_copy_add_view_3")          -> ELEMENTWISE
    classify_operator("triton_poi_fused_clone_transpose_view_4")       -> CAST_COPY
    classify_operator("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_..._ffma") -> GEMM
    classify_operator("RNN_blockPersist_fp_LSTM<float, float, float>") -> RNN

Inductor's pointwise kernels that name ``addmm`` are bias epilogues (the GEMM itself ran in
cuBLAS), so a ``triton_poi`` kernel is never a GEMM; only ``triton_tem`` templates are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal

from profiler_core.schema import OperatorClass

_C = OperatorClass

# Clean ATen names (without the "aten::" prefix) by class.
_ATEN_CLASSES: dict[OperatorClass, frozenset[str]] = {
    _C.GEMM: frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "einsum",
                        "_scaled_mm", "addmv", "mv", "dot", "_addmm_activation", "tensordot"}),
    _C.ATTENTION: frozenset({
        "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward", "_efficient_attention_forward", "_cudnn_attention_forward",
        "_scaled_dot_product_attention_math", "_native_multi_head_attention", "multi_head_attention_forward",
        "_scaled_dot_product_flash_attention_for_cpu", "flex_attention"}),
    _C.NORMALIZATION: frozenset({"layer_norm", "native_layer_norm", "batch_norm", "native_batch_norm",
                                 "_batch_norm_impl_index", "cudnn_batch_norm", "group_norm",
                                 "native_group_norm", "rms_norm", "_fused_rms_norm", "instance_norm",
                                 "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                                 "native_layer_norm_backward", "native_batch_norm_backward",
                                 "native_group_norm_backward", "_fused_rms_norm_backward"}),
    _C.REDUCTION: frozenset({"softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax",
                             "_softmax_backward_data", "_log_softmax_backward_data", "embedding_dense_backward",
                             "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var",
                             "std", "var_mean", "norm", "linalg_vector_norm", "cumsum", "prod",
                             "logsumexp", "topk", "sort", "any", "all"}),
    _C.CAST_COPY: frozenset({"_to_copy", "to", "copy_", "copy", "clone", "contiguous", "cat",
                             "convert_element_type", "_unsafe_view", "type_as", "stack",
                             "index_select", "gather", "embedding", "_reshape_alias", "reshape",
                             "view", "t", "transpose", "permute", "expand", "select", "slice",
                             "unsqueeze", "squeeze", "split", "chunk", "narrow", "as_strided",
                             "empty", "empty_like", "zeros", "zero_", "fill_", "ones"}),
    _C.RNN: frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu", "_cudnn_rnn", "lstm_cell", "gru_cell",
                       "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "rnn_tanh_cell"}),
    _C.CONVOLUTION: frozenset({"conv1d", "conv2d", "conv3d", "convolution", "_convolution",
                               "cudnn_convolution", "conv_transpose2d", "cudnn_convolution_relu"}),
    _C.COMMUNICATION: frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                 "all_to_all", "_allgather_base", "_reduce_scatter_base"}),
    _C.ELEMENTWISE: frozenset({
        "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "relu", "relu_", "gelu", "silu",
        "sigmoid", "tanh", "exp", "log", "pow", "sqrt", "rsqrt", "neg", "abs", "where", "clamp",
        "clamp_", "dropout", "native_dropout", "masked_fill", "masked_fill_", "threshold",
        "hardtanh", "leaky_relu", "elu", "erf", "sin", "cos", "maximum", "minimum", "addcmul",
        "addcdiv", "lerp", "floor", "ceil", "round", "remainder", "fmod", "reciprocal", "square",
        "gelu_", "silu_", "mish", "softplus", "eq", "ne", "lt", "gt", "le", "ge", "logical_not",
        "bitwise_and", "sign", "triu", "tril", "rsub"}),
}
_ATEN_LOOKUP = {name: cls for cls, names in _ATEN_CLASSES.items() for name in names}

# ATen ops that only move or reinterpret data: a fused kernel made of these is a copy.
_LAYOUT_OPS = frozenset({"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand",
                         "clone", "contiguous", "select", "slice", "unsqueeze", "squeeze", "copy",
                         "copy_", "as_strided", "cat", "split", "_reshape_alias", "stack"})
_CAST_OPS = frozenset({"_to_copy", "to", "convert_element_type", "type_as"})
_NORM_OPS = _ATEN_CLASSES[_C.NORMALIZATION]
_SOFTMAX_OPS = frozenset({"softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"})

# Multi-word op names inside Triton kernel names, longest first, so "native_layer_norm" is
# read as one op rather than "native", "layer", "norm".
_TRITON_MULTIWORD = sorted(
    {n for n in _ATEN_LOOKUP if "_" in n.strip("_")} | {"_to_copy", "_softmax", "_unsafe_view"},
    key=len, reverse=True,
)
_TRITON_RE = re.compile(r"^triton_(?P<kind>poi|per|red|tem|for|mm|bmm)_(?:fused_)?(?P<ops>.*?)(?:_\d+)?$")

# Library kernel names: ordered checks (attention before conv, because flash kernels say "fprop").
_KERNEL_PATTERNS: tuple[tuple[OperatorClass, re.Pattern[str]], ...] = (
    (_C.ATTENTION, re.compile(r"flash|fmha|sdpa|attention|mem_eff|fused_mha", re.I)),
    (_C.RNN, re.compile(r"rnn|lstm|gru_|_gru|persist", re.I)),
    (_C.COMMUNICATION, re.compile(r"nccl|allreduce|allgather|reducescatter", re.I)),
    (_C.CONVOLUTION, re.compile(r"conv|fprop|dgrad|wgrad|implicit_?gemm", re.I)),
    (_C.GEMM, re.compile(r"gemm|xmma|cutlass|nvjet|cublas|splitk|split_k|wgmma|hmma|matmul|gemv|"
                         r"ampere_.*_\d+x\d+|sm\d+_.*tilesize", re.I)),
    (_C.NORMALIZATION, re.compile(r"layer_?norm|batch_?norm|rms_?norm|group_?norm|instance_?norm", re.I)),
    (_C.REDUCTION, re.compile(r"softmax|reduce|argmax|argmin|cumsum|scan|topk|sort", re.I)),
    (_C.CAST_COPY, re.compile(r"memcpy|memset|copy|cast|convert|transpose|catarray|gather|"
                              r"index|embedding|fill", re.I)),
    (_C.ELEMENTWISE, re.compile(r"elementwise|vectorized|pointwise|unrolled|functor|activation|"
                                r"relu|gelu|silu|dropout", re.I)),
)

OverheadKind = Literal["cast", "copy", "epilogue"]


# The name tests below run per operator and per kernel, over a few hundred distinct names: each
# answer is remembered per name (a 100k-kernel diagnose asked aten_short 809k times).
_NAMES = 1 << 16


@lru_cache(maxsize=_NAMES)
def aten_short(name: str) -> str:
    """``aten::addmm`` / ``aten.addmm`` / ``aten.addmm.default`` -> ``addmm``; other names unchanged."""
    for prefix in ("aten::", "aten."):
        if name.startswith(prefix):
            rest = name[len(prefix):]
            return rest.split(".", 1)[0]
    return name


def aten_name(name: str) -> str:
    """Spell an ATen op the profile's way: ``aten.addmm`` -> ``aten::addmm``."""
    if name.startswith("aten::"):
        return name
    if name.startswith("aten."):
        return "aten::" + aten_short(name)
    return name


def triton_ops(name: str) -> tuple[str, list[str]] | None:
    """``triton_poi_fused_addmm_relu_0`` -> ``("poi", ["addmm", "relu"])``; None for other names."""
    match = _TRITON_RE.match(name)
    if not match:
        return None
    rest = match.group("ops")
    found: list[str] = []
    for word in _TRITON_MULTIWORD:
        if word in rest:
            found.append(word)
            rest = rest.replace(word, "_")
    found.extend(tok for tok in rest.split("_") if tok and not tok.isdigit())
    return match.group("kind"), found


def _class_of_ops(kind: str | None, ops: Iterable[str]) -> OperatorClass:
    """Class of a fused kernel from its kernel kind (poi/per/red/tem or None) and its ATen ops."""
    short = {aten_short(op) for op in ops}
    if short & _ATEN_CLASSES[_C.ATTENTION]:
        return _C.ATTENTION
    if kind in ("tem", "mm", "bmm") or (kind is None and short & _ATEN_CLASSES[_C.GEMM]):
        return _C.GEMM
    if short & _NORM_OPS:
        return _C.NORMALIZATION
    if kind in ("per", "red") or short & _ATEN_CLASSES[_C.REDUCTION]:
        return _C.REDUCTION
    if short and short <= (_LAYOUT_OPS | _CAST_OPS):
        return _C.CAST_COPY
    if kind == "poi" or short & _ATEN_CLASSES[_C.ELEMENTWISE]:
        return _C.ELEMENTWISE
    return _C.OTHER


def classify_operator(name: str, fused_with: Iterable[str] = ()) -> OperatorClass:
    """The operator class of an ATen op, a Triton kernel or a library kernel name."""
    fused = [aten_short(op) for op in fused_with]
    triton = triton_ops(name)
    if triton is not None:
        kind, ops = triton
        return _class_of_ops(kind, fused or ops)
    short = aten_short(name)
    if name.startswith(("aten::", "aten.")):
        if fused and short in _LAYOUT_OPS | _CAST_OPS:
            return _class_of_ops(None, fused)
        return _ATEN_LOOKUP.get(short, _class_of_ops(None, fused) if fused else _C.OTHER)
    if fused:
        return _class_of_ops(None, fused)
    for cls, pattern in _KERNEL_PATTERNS:
        if pattern.search(name):
            return cls
    return _ATEN_LOOKUP.get(short, _C.OTHER)


def is_softmax(name: str, fused_with: Iterable[str] = ()) -> bool:
    """True for a softmax op, or a fused kernel that contains one."""
    return _is_softmax(name, tuple(fused_with))


@lru_cache(maxsize=_NAMES)
def _is_softmax(name: str, fused_with: tuple[str, ...]) -> bool:
    ops = {aten_short(op) for op in fused_with}
    triton = triton_ops(name)
    if triton is not None:
        ops.update(triton[1])
    ops.add(aten_short(name))
    return bool(ops & _SOFTMAX_OPS)


def is_batched_gemm(name: str, fused_with: Iterable[str] = ()) -> bool:
    """True for the GEMMs of an attention score/value product (bmm, matmul, baddbmm, einsum)."""
    return _is_batched_gemm(name, tuple(fused_with))


@lru_cache(maxsize=_NAMES)
def _is_batched_gemm(name: str, fused_with: tuple[str, ...]) -> bool:
    short = aten_short(name)
    if short in {"bmm", "baddbmm", "matmul", "einsum"}:
        return True
    triton = triton_ops(name)
    if triton is not None and triton[0] in ("tem", "bmm"):
        return bool({"bmm", "baddbmm"} & ({aten_short(op) for op in fused_with} | set(triton[1])))
    return False


@lru_cache(maxsize=_NAMES)
def gemm_precision(kernel_name: str) -> str | None:
    """The math a GEMM kernel runs, read off its name: fp32 (SIMT), tf32, bf16, fp16, fp8, or None."""
    low = kernel_name.lower()
    if "e4m3" in low or "e5m2" in low or "fp8" in low:
        return "fp8"
    if "bf16" in low:
        return "bf16"
    if "tf32" in low:
        return "tf32"
    # fp16 before the bare MMA shapes: "ampere_fp16_s16816gemm" is fp16 with fp32 accumulation.
    if re.search(r"f16|fp16|h884|h1688|h16816|hmma|half", low) or re.search(r"_h_", low):
        return "fp16/bf16"
    if re.search(r"s1688|s16x8x8", low):  # m16n8k8 with fp32 accumulation: the TF32 MMA
        return "tf32"
    if "sgemm" in low or "ffma" in low or "f32f32_f32f32_f32" in low:
        return "fp32"
    return None


def overhead_kind(name: str, fused_with: Iterable[str] = ()) -> OverheadKind | None:
    """Whether a kernel is pure overhead a transformation can add: a cast, a copy, or an epilogue."""
    low = name.lower()
    if re.search(r"splitkreduce|split_k_reduce|splitk_reduce|epilogue", low):
        return "epilogue"
    ops = {aten_short(op) for op in fused_with}
    triton = triton_ops(name)
    if triton is not None:
        ops.update(triton[1])
    ops.discard("")
    if ops:
        if ops <= (_LAYOUT_OPS | _CAST_OPS) and ops & _CAST_OPS:
            return "cast"
        if ops <= _LAYOUT_OPS:
            return "copy"
        return None
    if re.search(r"cast|convert|to_copy|bfloat16_copy", low):
        return "cast"
    if re.search(r"memcpy|copy|transpose|catarray", low):
        return "copy"
    return None
